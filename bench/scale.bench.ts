import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawnSync } from "node:child_process";
import { fileURLToPath, pathToFileURL } from "node:url";
import { tf, useBackend } from "../src/backend.ts";
import { createModel, type Model } from "../src/nn/create.ts";
import type { ModelConfigInput } from "../src/nn/config.ts";
import type { TransformerClassifier } from "../src/nn/model.ts";
import { disposeTrace } from "../src/nn/trace.ts";
import { networkBounds } from "../src/lipschitz/networkBounds.ts";
import type { HeadVariant } from "../src/lipschitz/rules/attentionHead.ts";
import { mlpBound } from "../src/lipschitz/rules/mlp.ts";
import { networkLipschitz } from "../src/lipschitz/truth/inputJacobian.ts";
import { blockLipschitz, headLipschitz } from "../src/lipschitz/truth/powerIteration.ts";
import { useWeightCacheStore } from "../src/lipschitz/weightCache.ts";
import { weightCacheOnDisk } from "../src/analysis/weightCacheStore.ts";
import { trainStep } from "../src/train/step.ts";
import { AdamW } from "../src/train/optimizer.ts";
import { microBatchFor } from "../src/train/memory.ts";
import { renderTable } from "../src/util/table.ts";
import { estimateAnalysis, javascriptSpeed } from "../src/analysis/estimate.ts";

/**
 * Issue 35's benchmark at real size: BERT-base (post-LN, 128 tokens), a ViT-B/16 (pre-LN, 224 x
 * 224 x 3 images, patch 16: 197 tokens) and GPT-2 small (causal, 128 tokens), each built with
 * random weights by attnlip itself (nothing downloaded). For one input, the time of every
 * stage of an analysis, each as a ratio to one forward+backward pass of the same model (the
 * gradient of the cross-entropy with respect to every parameter, as a training step takes it)
 * measured in the same run; peak memory (the process's maximum resident set); and, where a
 * Python with torch and transformers is found (ATTNLIP_BENCH_PYTHON, default python3), the
 * same forward+backward in PyTorch, printed beside it and never required.
 *
 * Stages marked "extrapolated" are timed on a part (one block, one head, one token row) and
 * multiplied out: the full stage would take minutes to hours. `ATTNLIP_SCALE_MODELS=bert-base`
 * (a comma list) runs a subset.
 *
 * Each model, and the training step, runs in a process of its own: tfjs-wasm's heap grows to
 * at most 4 GB and never shrinks, so after a ViT-B/16 (whose forward+backward pass alone peaks
 * at 2.6 GB) the next model's stages stopped it with "Aborted()".
 */

interface ScaleModel {
  name: string;
  config: ModelConfigInput;
  /** One input of the model's kind. */
  input(): tf.Tensor;
  /** The PyTorch/transformers equivalent, for the optional reference (a Python expression). */
  torch: string;
}

const BERT_BASE: ScaleModel = {
  name: "bert-base",
  config: {
    kind: "text",
    vocabSize: 30522,
    maxLength: 512,
    tokenTypes: 2,
    dModel: 768,
    heads: 12,
    blocks: 12,
    mlpHidden: 3072,
    classes: 2,
    norm: "post",
    embeddingNorm: true,
    finalNorm: false,
    pooler: "tanh",
    activation: "gelu-erf",
    lnEps: 1e-12,
  },
  input: () => tf.tensor2d(Array.from({ length: 128 }, (_, i) => (i * 7919) % 30522), [1, 128], "int32"),
  torch: "BertForSequenceClassification(BertConfig(num_labels=2)), {'input_ids': torch.randint(0, 30522, (B, 128))}",
};

const VIT_B16: ScaleModel = {
  name: "vit-b16",
  config: {
    kind: "vit",
    imageSize: 224,
    channels: 3,
    patchSize: 16,
    dModel: 768,
    heads: 12,
    blocks: 12,
    mlpHidden: 3072,
    classes: 10,
    norm: "pre",
    activation: "gelu-erf",
    lnEps: 1e-12,
  },
  input: () => tf.randomUniform([1, 224, 224, 3], 0, 1, "float32", 0),
  torch: "ViTForImageClassification(ViTConfig(num_labels=10)), {'pixel_values': torch.rand(B, 3, 224, 224)}",
};

const GPT2_SMALL: ScaleModel = {
  name: "gpt2-small",
  config: {
    kind: "text",
    vocabSize: 50257,
    maxLength: 1024,
    dModel: 768,
    heads: 12,
    blocks: 12,
    mlpHidden: 3072,
    classes: 2,
    norm: "pre",
    causal: true,
    pooling: "last",
    headBias: false,
    activation: "gelu-tanh",
    lnEps: 1e-5,
  },
  input: () => tf.tensor2d(Array.from({ length: 128 }, (_, i) => (i * 7919) % 50257), [1, 128], "int32"),
  torch: "GPT2ForSequenceClassification(GPT2Config(num_labels=2, pad_token_id=50256)), {'input_ids': torch.randint(0, 50000, (B, 128))}",
};

const MODELS = [BERT_BASE, VIT_B16, GPT2_SMALL];

/** The variant families timed one at a time (cached weight norms, relaxed MLP). */
const FAMILIES: [string, HeadVariant[]][] = [
  ["t3 (paper, t3-one/half/top2/quad/exact)", ["paper", "t3-one", "t3-half", "t3-top2", "t3-quad", "t3-exact"]],
  ["dist", ["dist"]],
  ["cov", ["cov"]],
  ["fused", ["fused"]],
  ["castin", ["castin"]],
];

/** Families timed on one block and multiplied out. */
const EXPENSIVE = ["cov", "fused"];

/** Products per block or head true value in the timed Lanczos runs (issue 35: 40). */
const PRODUCTS = 40;

const seconds = (t0: number) => (performance.now() - t0) / 1000;
const peakMiB = () => process.resourceUsage().maxRSS / 1024;

interface Stage {
  stage: string;
  seconds: number;
  extrapolated: boolean;
  note?: string;
}

async function forwardBackward(model: TransformerClassifier, x: tf.Tensor): Promise<number> {
  const classes = model.config.classes;
  const y = tf.oneHot(tf.zeros([x.shape[0]], "int32"), classes);
  const once = async () => {
    const t0 = performance.now();
    const { value, grads } = tf.variableGrads(() => tf.losses.softmaxCrossEntropy(y, model.forward(x).logits) as tf.Scalar, model.variables());
    await value.data();
    for (const g of Object.values(grads)) await g.data();
    tf.dispose([value, ...Object.values(grads)]);
    return seconds(t0);
  };
  await once(); // warm-up: kernels compiled, memory allocated
  const samples = [await once(), await once()];
  y.dispose();
  return Math.min(...samples);
}

async function benchModel(spec: ScaleModel): Promise<Record<string, unknown>> {
  const t0 = performance.now();
  const model = createModel(spec.config, 0) as TransformerClassifier;
  const params = model.variables().reduce((a, v) => a + v.size, 0);
  const c = model.config;
  console.log(`\n${spec.name}: ${c.blocks} blocks, d_model ${c.dModel}, ${c.heads} heads, ${(params / 1e6).toFixed(1)} M parameters (random weights, created in ${seconds(t0).toFixed(1)} s)`);
  const x = spec.input();
  const reference = await forwardBackward(model, x);
  console.log(`  reference: one forward+backward pass, 1 input: ${reference.toFixed(2)} s`);
  const stages: Stage[] = [];
  const add = (stage: string, s: number, extrapolated = false, note?: string) => {
    stages.push({ stage, seconds: s, extrapolated, note });
    console.log(`  ${stage}: ${s.toFixed(2)} s (${(s / reference).toFixed(2)}x)${extrapolated ? " extrapolated" : ""}${note ? ` (${note})` : ""}`);
  };

  let t = performance.now();
  const { logits, trace } = model.forward(x, { trace: true });
  await logits.data();
  add("forward trace", seconds(t));

  const dir = mkdtempSync(join(tmpdir(), "attnlip-scale-"));
  const before = useWeightCacheStore(weightCacheOnDisk({ dir }));
  try {
    t = performance.now();
    networkBounds(model, trace!, { mlp: "relaxed", variants: ["t3-half", "t3-exact"] });
    add("t3-half + t3-exact, every block and the network, cold (weight norms computed)", seconds(t));
    t = performance.now();
    networkBounds(model, trace!, { mlp: "relaxed", variants: ["t3-half", "t3-exact"] });
    add("t3-half + t3-exact, weight norms cached", seconds(t));
    for (const [family, variants] of FAMILIES) {
      if (EXPENSIVE.includes(family)) continue;
      t = performance.now();
      networkBounds(model, trace!, { mlp: "relaxed", variants });
      add(`variant family ${family}, MLP relaxed`, seconds(t));
    }
    // cov and fused alone: timed on a one-block model of the same shapes (its block costs what
    // each of the 12 does) and multiplied by the blocks; all of them together on the whole model below.
    const one = createModel({ ...spec.config, blocks: 1 } as ModelConfigInput, 0) as TransformerClassifier;
    const oneTrace = one.forward(x, { trace: true });
    oneTrace.logits.dispose();
    networkBounds(one, oneTrace.trace!, { mlp: "relaxed", variants: ["t3-half"] }); // its weight norms
    for (const family of EXPENSIVE) {
      t = performance.now();
      networkBounds(one, oneTrace.trace!, { mlp: "relaxed", variants: [family as HeadVariant] });
      const s = seconds(t) * c.blocks;
      add(`variant family ${family}, MLP relaxed`, s, true, `one block x ${c.blocks}`);
    }
    disposeTrace(oneTrace.trace!);
    one.dispose();
    // Every variant in one run: the families share the trace's tensors, each head's row
    // statistics and the relaxed MLP, so this is below the families' sum.
    t = performance.now();
    networkBounds(model, trace!, { mlp: "relaxed" });
    add("every variant in one run (cov and fused included), MLP relaxed", seconds(t));

    // The exact local MLP factor: one token row of block 0, times rows and blocks.
    const w = model.getWeights();
    const pre = (await trace!.blocks[0].mlpPre.data()) as Float32Array;
    const n = trace!.blocks[0].mlpPre.shape[1] as number;
    const w1 = Float64Array.from(w.get("blocks.0.mlp.w1")!.data);
    const w2 = Float64Array.from(w.get("blocks.0.mlp.w2")!.data);
    t = performance.now();
    mlpBound(pre.subarray(0, c.mlpHidden), 1, c.dModel, c.mlpHidden, w1, w2, { w1: 1, w2: 1 }, { local: true, activation: c.activation });
    add(`exact local MLP (--mlp local): 1 row x ${n} rows x ${c.blocks} blocks`, seconds(t) * n * c.blocks, true);
  } finally {
    useWeightCacheStore(before);
    rmSync(dir, { recursive: true, force: true });
  }

  t = performance.now();
  networkLipschitz(model, x);
  add(`network true value (exact input Jacobian, ${c.classes} classes)`, seconds(t));

  const blockInput = trace!.blocks[0].input;
  const attnInput = trace!.blocks[0].attnInput;
  t = performance.now();
  blockLipschitz(model, 0, blockInput, null, { maxIterations: PRODUCTS, tolerance: 0 });
  const oneBlock = seconds(t);
  add(`block true value, one block (${PRODUCTS} products)`, oneBlock);
  add(`block true values, every block (${PRODUCTS} products each)`, oneBlock * c.blocks, true);
  t = performance.now();
  headLipschitz(model, 0, 0, attnInput, null, { maxIterations: PRODUCTS, tolerance: 0 });
  const oneHead = seconds(t);
  add(`head true values, every head (${PRODUCTS} products each)`, oneHead * c.heads * c.blocks, true);

  // The estimate `analyze` prints before a long run (src/analysis/estimate.ts), at this run's
  // speed (its forward trace and the JavaScript kernel timed now), beside what was measured.
  const kernelSeconds = javascriptSpeed();
  const estimate = estimateAnalysis(
    {
      blocks: c.blocks,
      heads: c.heads,
      dModel: c.dModel,
      mlpHidden: c.mlpHidden,
      tokens: trace!.blocks[0].input.shape[1] as number,
      classes: c.classes,
      preNorm: c.norm === "pre",
      inputs: 1,
      variants: ["cov", "fused"],
      mlp: "local",
      blockTruth: true,
      headTruth: true,
      iterations: PRODUCTS,
      weightNormsCached: false,
      workers: 1,
    },
    { forwardSeconds: stages[0].seconds, kernelSeconds },
  );
  console.log(`  analyze's estimate at this speed (JavaScript kernel ${(kernelSeconds * 1000).toFixed(1)} ms): ${estimate.stages.map((e) => `${e.stage} ${e.seconds.toFixed(1)} s`).join(", ")}`);

  disposeTrace(trace!);
  tf.dispose([logits, x]);
  const peak = peakMiB();
  model.dispose();
  return {
    model: spec.name,
    config: c,
    parameters: params,
    forwardBackwardSeconds: reference,
    stages: stages.map((s) => ({ ...s, ratioToForwardBackward: s.seconds / reference })),
    peakRssMiB: peak,
    estimate: { kernelSeconds, stages: estimate.stages },
  };
}

/**
 * One BERT-base JaSMin fine-tuning step (128 tokens, `batch` examples) beside one forward+backward
 * of the batch. The step runs in micro-batches of what the wasm heap holds (train/memory.ts
 * microBatchFor: 1 example per pass for BERT-base), and so does the forward+backward, timed per
 * pass (forwardBackward: the best of 2 after a warm-up) and added up over the batch's passes.
 */
async function trainingStep(batch: number): Promise<Record<string, unknown>> {
  const model = createModel(BERT_BASE.config, 0) as TransformerClassifier;
  const x = tf.tensor2d(Array.from({ length: batch * 128 }, (_, i) => (i * 7919) % 30522), [batch, 128], "int32");
  const labels = tf.tensor1d(Array.from({ length: batch }, (_, i) => i % 2), "int32");
  const optimizer = new AdamW(model.variables().map((v) => [v.name, v] as [string, tf.Variable]));
  // With the optimizer's moments allocated: the micro-batch the step picks by itself.
  const microBatch = microBatchFor(model as unknown as Model, x);
  const parts = Math.ceil(batch / microBatch);
  const size = Math.ceil(batch / parts);
  const sizes = Array.from({ length: parts }, (_, i) => Math.min(size, batch - i * size));
  const perPass = new Map<number, number>();
  for (const rows of new Set(sizes)) {
    const slice = tf.slice(x, 0, rows);
    perPass.set(rows, await forwardBackward(model, slice));
    slice.dispose();
  }
  const reference = sizes.reduce((a, rows) => a + perPass.get(rows)!, 0);
  const settings = { lr: 1e-5, clip: 1, jasmin: { lambda: 0.1, norm: "top2" as const, reduce: "max-log" as const, layers: null } };
  tf.tidy(() => void trainStep(model as unknown as Model, optimizer, tf.slice(x, 0, 1), tf.slice(labels, 0, 1), settings)); // warm-up
  const t = performance.now();
  const metrics = trainStep(model as unknown as Model, optimizer, x, labels, { ...settings, microBatch });
  const step = seconds(t);
  const heap = ((tf.backend() as unknown as { wasm: { HEAPU8: Uint8Array } }).wasm.HEAPU8.length / 2 ** 20) | 0;
  const passes = `${parts} pass${parts > 1 ? "es" : ""} of ${size}`;
  console.log(
    `\nbert-base JaSMin fine-tuning step, batch ${batch} x 128 tokens in ${passes}: ${step.toFixed(2)} s; forward+backward of the batch (${passes}, ${perPass.get(size)!.toFixed(2)} s each) ${reference.toFixed(2)} s (${(step / reference).toFixed(2)}x); wasm heap ${heap} MiB`,
  );
  optimizer.dispose();
  tf.dispose([x, labels]);
  model.dispose();
  return {
    batch,
    tokens: 128,
    microBatch: size,
    passes: parts,
    jasminStepSeconds: step,
    forwardBackwardSeconds: reference,
    forwardBackwardPassSeconds: perPass.get(size),
    ratio: step / reference,
    loss: metrics.loss,
    wasmHeapMiB: heap,
  };
}

/** PyTorch's forward+backward of the same shapes, when a Python with torch and transformers is there. */
function torchReference(): Record<string, number> | null {
  const python = process.env.ATTNLIP_BENCH_PYTHON ?? "python3";
  const script = `
import time, json, torch
from transformers import BertConfig, BertForSequenceClassification, ViTConfig, ViTForImageClassification, GPT2Config, GPT2ForSequenceClassification
torch.manual_seed(0)
B = 1
out = {}
for name, (model, inputs) in {
  "bert-base": (${BERT_BASE.torch}),
  "vit-b16": (${VIT_B16.torch}),
  "gpt2-small": (${GPT2_SMALL.torch}),
}.items():
  model.train(False)
  def once():
    t = time.perf_counter()
    loss = torch.nn.functional.cross_entropy(model(**inputs).logits, torch.zeros(B, dtype=torch.long))
    loss.backward()
    model.zero_grad()
    return time.perf_counter() - t
  once()
  out[name] = min(once(), once())
print(json.dumps({"threads": torch.get_num_threads(), "torch": torch.__version__, **out}))
`;
  const r = spawnSync(python, ["-c", script], { encoding: "utf8", timeout: 600_000 });
  if (r.status !== 0) {
    console.log(`(no PyTorch reference: ${python} with torch and transformers not found)`);
    return null;
  }
  return JSON.parse(r.stdout.trim().split("\n").pop()!) as Record<string, number>;
}

export async function benchScale(): Promise<Record<string, unknown>> {
  await useBackend("wasm");
  const wanted = process.env.ATTNLIP_SCALE_MODELS?.split(",").map((s) => s.trim());
  const models = MODELS.filter((m) => wanted === undefined || wanted.includes(m.name));
  const load = (await import("node:os")).loadavg();
  console.log(`load average at start: ${load.map((l) => l.toFixed(2)).join(", ")} (${(await import("node:os")).cpus().length} cores)`);
  const results: Record<string, unknown>[] = [];
  for (const m of models) {
    const r = inChild(m.name);
    if ("error" in r) console.log(`  ${m.name}: ${r.error as string}`);
    else results.push(r);
  }
  let training: Record<string, unknown> | null = null;
  // Issue 35's batch of 8 (in micro-batches, train/memory.ts); 4, 2, 1 if it stops the wasm heap.
  if (wanted === undefined || wanted.includes("bert-base"))
    for (const batch of [8, 4, 2, 1]) {
      const r = inChild(`training:${batch}`);
      if (!("error" in r)) {
        training = r;
        break;
      }
      console.log(`  training step, batch ${batch}: ${r.error as string}`);
    }
  const torch = torchReference();
  console.log("\nratio of each stage to one forward+backward pass of the same model, 1 input (wasm backend, one thread)");
  if (results.length === 0) return { loadAverageAtStart: load, models: results, training, torch };
  const names = [...new Set(results.flatMap((r) => (r.stages as Stage[]).map((s) => s.stage)))];
  console.log(
    renderTable(
      ["stage", ...results.map((r) => r.model as string)],
      [
        ["forward+backward (reference), s", ...results.map((r) => (r.forwardBackwardSeconds as number).toFixed(2))],
        ...(torch ? [[`PyTorch ${torch.torch} forward+backward (${torch.threads} threads), s`, ...results.map((r) => (torch[r.model as string] ?? NaN).toFixed(2))]] : []),
        ...names.map((name) => [
          name,
          ...results.map((r) => {
            const s = (r.stages as (Stage & { ratioToForwardBackward: number })[]).find((x) => x.stage === name);
            return s === undefined ? "" : `${s.ratioToForwardBackward.toFixed(2)}x (${s.seconds.toFixed(1)} s)${s.extrapolated ? "*" : ""}`;
          }),
        ]),
        ["peak resident memory, MiB", ...results.map((r) => (r.peakRssMiB as number).toFixed(0))],
      ],
    ),
  );
  console.log("* extrapolated from one block, head or token row");
  return { loadAverageAtStart: load, models: results, training, torch };
}

/**
 * Runs one part (a model's name, or `training:BATCH`) in a fresh process (its own wasm heap),
 * its lines shown as they come; returns its result, or {error} when the process failed.
 */
function inChild(part: string): Record<string, unknown> {
  const dir = mkdtempSync(join(tmpdir(), "attnlip-scale-part-"));
  const out = join(dir, "result.json");
  try {
    const r = spawnSync(process.execPath, ["--import", "tsx", fileURLToPath(import.meta.url)], {
      env: { ...process.env, ATTNLIP_SCALE_PART: part, ATTNLIP_SCALE_OUT: out },
      stdio: ["ignore", "inherit", "pipe"],
      encoding: "utf8",
    });
    if (r.status !== 0) {
      const last = (r.stderr ?? "").split("\n").filter((l) => /Error|Aborted/.test(l)).pop();
      return { error: `stopped (exit ${r.status}${last ? `: ${last.trim().slice(0, 160)}` : ""})` };
    }
    return JSON.parse(readFileSync(out, "utf8")) as Record<string, unknown>;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// The child side of inChild.
if (process.env.ATTNLIP_SCALE_PART !== undefined && import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const part = process.env.ATTNLIP_SCALE_PART;
  await useBackend("wasm");
  const result = part.startsWith("training:")
    ? await trainingStep(Number(part.slice("training:".length)))
    : await benchModel(MODELS.find((m) => m.name === part)!);
  writeFileSync(process.env.ATTNLIP_SCALE_OUT!, JSON.stringify(result));
}
