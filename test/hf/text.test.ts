// Hugging Face BertForSequenceClassification and GPT2ForSequenceClassification imports with
// their tokenizer.json, checked against test/fixtures/hf/{bert,gpt2}-tiny-random: tiny random
// models written by transformers' save_pretrained, with tokens, ids, logits, attention maps and
// exact Jacobian spectral norms computed by the library itself in float64 (reference.json).
import { test } from "node:test";
import assert from "node:assert/strict";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { tf, useBackend } from "../../src/backend.ts";
import { loadHfModel } from "../../src/hf/load.ts";
import { hfTextTokenizer, loadHfTokenizer } from "../../src/hf/textTokenizer.ts";
import { HfImportError } from "../../src/hf/types.ts";
import { encodeSafetensors } from "../../src/io/safetensors.ts";
import { readSafetensors } from "../../src/io/safetensorsFile.ts";
import { networkBounds } from "../../src/lipschitz/networkBounds.ts";
import { HEAD_VARIANTS } from "../../src/lipschitz/rules/attentionHead.ts";
import { networkLipschitz } from "../../src/lipschitz/truth/inputJacobian.ts";
import { blockLipschitz } from "../../src/lipschitz/truth/powerIteration.ts";
import type { TextConfig } from "../../src/nn/config.ts";
import type { TransformerClassifier } from "../../src/nn/model.ts";
import { disposeTrace } from "../../src/nn/trace.ts";
import { textForward64 } from "../helpers/reference64.ts";
import { runAttnlip, runAttnlipHere } from "../helpers/cli.ts";
import { modelInputs } from "../../src/robustness/modelInputs/index.ts";
import { readsInFileOrder } from "../../src/data/evaluationInputs.ts";

interface TextReference {
  model_class: string;
  inputs: { texts: string[]; tokens: string[][]; input_ids: number[][]; attention_mask: number[][] };
  logits: number[][];
  attentions: number[][][];
  attention_shape: number[];
  jacobian_spectral_norm: (number | null)[];
  layer_jacobian_spectral_norm: (number[] | null)[];
}

const MODELS = ["bert", "gpt2"] as const;
const dir = (m: (typeof MODELS)[number]) => new URL(`../fixtures/hf/${m}-tiny-random`, import.meta.url).pathname;
const reference = (m: (typeof MODELS)[number]) => JSON.parse(readFileSync(join(dir(m), "reference.json"), "utf8")) as TextReference;

// float32 against transformers' float64 (measured: logits within 3e-6, attention within 2e-6).
const F32_LOGITS = 1e-4;
const F32_ATTENTION = 1e-5;
const F32_RELATIVE = 1e-4;

/** The model, its tokenizer, and the reference texts encoded as attnlip encodes them (padded to the reference's width). */
async function load(m: (typeof MODELS)[number]) {
  const hf = await loadHfModel(dir(m), "analyze");
  const config = hf.config as TextConfig;
  const tokenizer = await hfTextTokenizer(dir(m), config, hf.hfConfig, "analyze");
  const ref = reference(m);
  const n = ref.inputs.input_ids[0].length;
  const { ids, lengths } = tokenizer.encodeBatch(ref.inputs.texts, n);
  const mask = new Float32Array(ids.length);
  lengths.forEach((l, e) => mask.fill(1, e * n, e * n + l));
  return { model: hf.model as TransformerClassifier, config, tokenizer, ref, n, ids, lengths, mask, architecture: hf.architecture };
}

for (const m of MODELS) {
  test(`${m}: tokens and ids from tokenizer.json are the library's (WordPiece / byte-level BPE, accents, emoji, empty text); padding and mask as the tokenizer defines them`, async () => {
    await useBackend("wasm");
    const { model, tokenizer, ref, ids, lengths, mask, n } = await load(m);
    model.dispose();
    assert.deepEqual(Array.from(ids), ref.inputs.input_ids.flat());
    assert.deepEqual(Array.from(mask), ref.inputs.attention_mask.flat());
    ref.inputs.texts.forEach((text, e) => {
      const real = ref.inputs.tokens[e].slice(0, lengths[e]);
      assert.deepEqual(tokenizer.tokens(text), real, `text ${e}`);
      assert.deepEqual(tokenizer.decode(ids.subarray(e * n, (e + 1) * n)), ref.inputs.tokens[e], `text ${e}`);
    });
  });

  test(`${m}: imported logits within 1e-4 and attention maps within 1e-5 of transformers' own; the float64 reference agrees within 1e-6`, async () => {
    await useBackend("wasm");
    const { model, config, ref, n, ids, lengths, mask } = await load(m);
    const b = ref.inputs.texts.length;
    const x = tf.tensor2d(ids, [b, n], "int32");
    const mk = tf.tensor2d(mask, [b, n]);
    try {
      const { logits, trace } = model.forward(x, { trace: true, mask: mk });
      const got = logits.arraySync() as number[][];
      const weights = model.getWeights();
      for (let e = 0; e < b; e++) {
        if (lengths[e] === 0) continue; // the all-padding GPT-2 row: the library's convention, not compared (README of the fixtures)
        ref.logits[e].forEach((v, j) => assert.ok(Math.abs(v - got[e][j]) <= F32_LOGITS, `text ${e} logit ${j}: ${got[e][j]} vs ${v}`));
        const exact = textForward64(config, weights, ids.subarray(e * n, (e + 1) * n), mask.subarray(e * n, (e + 1) * n)).logits;
        ref.logits[e].forEach((v, j) => assert.ok(Math.abs(v - exact[j]) <= 1e-6, `text ${e} logit ${j} (float64): ${exact[j]} vs ${v}`));
      }
      const [, heads] = ref.attention_shape;
      ref.attentions.forEach((rows, layer) => {
        const p = trace!.blocks[layer].attn.p.dataSync();
        let worst = 0;
        for (let e = 0; e < b; e++)
          for (let h = 0; h < heads; h++)
            for (let i = 0; i < lengths[e]; i++) {
              const r = (e * heads + h) * n + i;
              rows[r].forEach((v, j) => (worst = Math.max(worst, Math.abs(v - p[r * n + j]))));
            }
        assert.ok(worst <= F32_ATTENTION, `layer ${layer}: attention differs by ${worst}`);
      });
      logits.dispose();
      disposeTrace(trace!);
    } finally {
      tf.dispose([x, mk]);
      model.dispose();
    }
  });

  test(`${m}: network and per-layer true values within 1e-4 of the reference, every bound variant above the layer values`, async () => {
    await useBackend("wasm");
    const { model, ref, n, ids, lengths, mask } = await load(m);
    const keep = [...lengths.keys()].filter((e) => lengths[e] > 0);
    const x = tf.tensor2d(Int32Array.from(keep.flatMap((e) => Array.from(ids.subarray(e * n, (e + 1) * n)))), [keep.length, n], "int32");
    const mk = tf.tensor2d(Float32Array.from(keep.flatMap((e) => Array.from(mask.subarray(e * n, (e + 1) * n)))), [keep.length, n]);
    try {
      const network = networkLipschitz(model, x, { mask: mk });
      const { logits, trace } = model.forward(x, { trace: true, mask: mk });
      logits.dispose();
      const bounds = networkBounds(model, trace!);
      keep.forEach((e, k) => {
        const v = ref.jacobian_spectral_norm[e]!;
        assert.ok(Math.abs(network[k] - v) <= F32_RELATIVE * v, `text ${e}: network ${network[k]} vs ${v}`);
        for (const name of HEAD_VARIANTS) assert.ok(bounds.examples[k].network[name] >= v, `text ${e}: network ${name}`);
        ref.layer_jacobian_spectral_norm[e]!.forEach((lv, layer) => {
          const input = tf.slice(trace!.blocks[layer].input, [k, 0, 0], [1, -1, -1]);
          const exMask = tf.slice(mk, [k, 0], [1, -1]);
          const est = blockLipschitz(model, layer, input, exMask, { tolerance: 1e-7 });
          tf.dispose([input, exMask]);
          assert.ok(est.converged, `text ${e} layer ${layer}: not converged`);
          assert.ok(Math.abs(est.value - lv) <= F32_RELATIVE * lv, `text ${e} layer ${layer}: ${est.value} vs ${lv}`);
          for (const [name, bound] of Object.entries(bounds.examples[k].blocks[layer].block))
            assert.ok(bound >= lv, `text ${e} layer ${layer}: ${name} ${bound} < ${lv}`);
        });
      });
      disposeTrace(trace!);
    } finally {
      tf.dispose([x, mk]);
      model.dispose();
    }
  });
}

test("text folders attnlip cannot import are refused with one line naming the problem", async () => {
  const copy = (m: (typeof MODELS)[number], edit: (config: Record<string, unknown>) => void) => {
    const d = mkdtempSync(join(tmpdir(), "attnlip-hf-text-"));
    cpSync(dir(m), d, { recursive: true });
    const config = JSON.parse(readFileSync(join(d, "config.json"), "utf8")) as Record<string, unknown>;
    edit(config);
    writeFileSync(join(d, "config.json"), JSON.stringify(config));
    return d;
  };
  const refused = async (d: string, pattern: RegExp) => {
    await assert.rejects(
      (async () => {
        const hf = await loadHfModel(d, "analyze");
        try {
          await hfTextTokenizer(d, hf.config as TextConfig, hf.hfConfig, "analyze");
        } finally {
          hf.model.dispose();
        }
      })(),
      (e: Error) => {
        assert.ok(e instanceof HfImportError, e.message);
        assert.match(e.message, pattern);
        assert.ok(!e.message.includes("\n"));
        return true;
      },
    );
  };
  await refused(copy("gpt2", (c) => (c.scale_attn_by_inverse_layer_idx = true)), /scale_attn_by_inverse_layer_idx true is not supported/);
  await refused(copy("gpt2", (c) => (c.scale_attn_weights = false)), /scale_attn_weights false is not supported/);
  await refused(copy("bert", (c) => (c.position_embedding_type = "relative_key")), /position_embedding_type "relative_key" is not supported/);
  await refused(copy("bert", (c) => (c.is_decoder = true)), /is_decoder true is not supported/);
  await refused(copy("bert", (c) => (c.num_hidden_layers = 1)), /holds tensors a BertForSequenceClassification does not use \(bert.encoder.layer.1/);
  await refused(copy("gpt2", (c) => (c.n_inner = 64)), /tensor "transformer.h.0.mlp.c_fc.weight" has shape \[32, 128\], expected \[32, 64\]/);
  await refused(copy("bert", (c) => (c.vocab_size = 100)), /word_embeddings.weight" has shape \[160, 32\], expected \[100, 32\]/);
  const noTokenizer = copy("bert", () => {});
  writeFileSync(join(noTokenizer, "tokenizer.json"), "[1, 2]");
  await refused(noTokenizer, /tokenizer.json: not a JSON object/);
  writeFileSync(join(noTokenizer, "tokenizer.json"), JSON.stringify({ model: { type: "Nope" } }));
  await refused(noTokenizer, /tokenizer.json: not a tokenizer @huggingface\/tokenizers can read/);
  // A tokenizer with more ids than the model has embeddings belongs to another model.
  const other = copy("bert", () => {});
  cpSync(join(dir("gpt2"), "tokenizer.json"), join(other, "tokenizer.json"));
  await refused(other, /tokenizer.json has 300 tokens, the model's word embeddings only 160/);
});

test("a long text is truncated to the model's positions, keeping the special tokens around it", async () => {
  const tok = (await loadHfTokenizer(dir("bert"), 8, 0, "analyze"))!;
  const ids = tok.encode("free money now click here free money now click here");
  assert.equal(ids.length, 8);
  assert.equal(ids[0], 2); // [CLS]
  assert.equal(ids[7], 3); // [SEP]
  const full = tok.encode("free money");
  assert.deepEqual(full.slice(0, 3), ids.slice(0, 3));
  assert.equal(await loadHfTokenizer(join(dir("bert"), "missing"), 8, 0, "analyze"), null);
});

test("attnlip analyze and attack take a BERT or GPT-2 folder with --data csv:FILE: file order, the records named, an empty text refused", async () => {
  const work = mkdtempSync(join(tmpdir(), "attnlip-hf-text-run-"));
  const csv = join(work, "texts.csv");
  writeFileSync(csv, "text,label\nfree money now click here,spam\nthe meeting is on thursday,ham\nwin a prize today,spam\n,ham\n");
  const r = runAttnlip(["analyze", dir("bert"), "--data", `csv:${csv}`, "--n", "3", "--variants", "t3-exact,dist", "--out", join(work, "bert")]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /analyzing .* \(Hugging Face BertForSequenceClassification\) on 3 test texts/);
  assert.match(r.stdout, /the records of csv:.* in file order \(imported model, not trained by attnlip/);
  const analysis = JSON.parse(readFileSync(join(work, "bert", "analysis.json"), "utf8")) as {
    split: { origin: string; order: string; indices: number[] };
    layers: Record<string, Record<string, number[]>> & { network: { true: number[]; "t3-exact": number[]; outsideBlocks: Record<string, number[]> } };
  };
  // BERT's factors outside the blocks; with the blocks' bounds they multiply to the network bound.
  const outside = analysis.layers.network.outsideBlocks;
  assert.deepEqual(Object.keys(outside), ["embedding", "embedding.norm", "pool", "pooler", "head"]);
  analysis.layers.network["t3-exact"].forEach((bound, i) => {
    const product = Object.values(outside).reduce((p, v) => p * v[i], 1) * analysis.layers["block.0"]["t3-exact"][i] * analysis.layers["block.1"]["t3-exact"][i];
    assert.ok(Math.abs(product - bound) <= 1e-9 * bound, `input ${i}: ${product} vs ${bound}`);
  });
  assert.match(r.stdout, /Factors outside the blocks \(medians; the same for every variant\): embedding 1, embedding.norm [\d.]+, pool 1, pooler [\d.]+, head [\d.]+\./);
  assert.equal(analysis.split.origin, "imported");
  assert.equal(analysis.split.order, "file");
  assert.deepEqual(analysis.split.indices, [0, 1, 2]);
  analysis.layers.network.true.forEach((v, i) => assert.ok(analysis.layers.network["t3-exact"][i] >= v));
  // GPT-2 adds no special token: the empty fourth text has no token at all.
  const empty = await runAttnlipHere(["attack", dir("gpt2"), "--data", `csv:${csv}`, "--n", "4", "--out", join(work, "gpt2.json")]);
  assert.equal(empty.code, 2, empty.stderr);
  assert.match(empty.stderr, /^attnlip: attack: data csv:.*: record 4 has no tokens under this model's tokenizer/);
  const a = await runAttnlipHere(["attack", dir("gpt2"), "--data", `csv:${csv}`, "--n", "3", "--eps", "0.05", "--attack", "fgsm", "--out", join(work, "gpt2.json")]);
  assert.equal(a.code, 0, a.stderr);
  const attack = JSON.parse(readFileSync(join(work, "gpt2.json"), "utf8")) as { split: { order: string }; model: { pooling: string; causal: boolean } };
  assert.equal(attack.split.order, "file");
  assert.deepEqual([attack.model.pooling, attack.model.causal], ["last", true]);
});

test("sharded weights (model.safetensors.index.json) import as the single file does; a missing shard is named", async () => {
  await useBackend("wasm");
  const d = mkdtempSync(join(tmpdir(), "attnlip-hf-shards-"));
  for (const f of ["config.json", "tokenizer.json"]) cpSync(join(dir("bert"), f), join(d, f));
  const { tensors } = await readSafetensors(join(dir("bert"), "model.safetensors"));
  const names = [...tensors.keys()];
  const half = Math.ceil(names.length / 2);
  const shards = [names.slice(0, half), names.slice(half)];
  const weightMap: Record<string, string> = {};
  shards.forEach((part, k) => {
    const file = `model-0000${k + 1}-of-00002.safetensors`;
    writeFileSync(join(d, file), encodeSafetensors(new Map(part.map((n) => [n, { data: tensors.get(n)!.data, shape: tensors.get(n)!.shape }]))));
    for (const n of part) weightMap[n] = file;
  });
  writeFileSync(join(d, "model.safetensors.index.json"), JSON.stringify({ metadata: {}, weight_map: weightMap }));
  const sharded = await loadHfModel(d, "analyze");
  const single = await loadHfModel(dir("bert"), "analyze");
  try {
    const a = single.model.getWeights();
    for (const [name, t] of sharded.model.getWeights()) assert.deepEqual(t.data, a.get(name)!.data, name);
  } finally {
    sharded.model.dispose();
    single.model.dispose();
  }
  rmSync(join(d, "model-00002-of-00002.safetensors"));
  await assert.rejects(loadHfModel(d, "analyze"), /shard model-00002-of-00002.safetensors \(listed in model.safetensors.index.json\) is missing/);
});

test("an imported model's own class names (id2label) give the data's labels their ids; an embedded corpus gets the seeded split, a file its order; a smaller tokenizer is flagged", async () => {
  await useBackend("wasm");
  const d = mkdtempSync(join(tmpdir(), "attnlip-hf-labels-"));
  cpSync(dir("bert"), d, { recursive: true });
  const config = JSON.parse(readFileSync(join(d, "config.json"), "utf8")) as Record<string, unknown>;
  config.id2label = { 0: "spam", 1: "ham" };
  config.label2id = { spam: 0, ham: 1 };
  writeFileSync(join(d, "config.json"), JSON.stringify(config));
  const csv = new URL("../fixtures/hf/texts.csv", import.meta.url).pathname; // spam, ham, spam, ham
  const load = async (folder: string, data: string) => {
    const hf = await loadHfModel(folder, "analyze");
    const tokenizer = await hfTextTokenizer(folder, hf.config as TextConfig, hf.hfConfig, "analyze");
    const inputs = await modelInputs("text", "analyze").load(
      hf.model as TransformerClassifier,
      { who: "analyze", data, trained: null, imported: true, seed: 0, n: 4 },
      { tokenizer, labels: hf.labels },
    );
    const result = { labels: Array.from(inputs.labels), order: inputs.info.order };
    inputs.dispose();
    hf.model.dispose();
    return result;
  };
  assert.deepEqual(await load(d, `csv:${csv}`), { labels: [0, 1, 0, 1], order: "file" });
  assert.deepEqual(await load(dir("bert"), `csv:${csv}`), { labels: [1, 0, 1, 0], order: "file" }); // placeholders: sorted (ham 0, spam 1)
  // The embedded corpus is stored ordered by class: a seeded split, not its order (tokenizing it takes a minute here).
  assert.equal(readsInFileOrder("spam", true), false);
  assert.equal(readsInFileOrder(`jsonl:${csv}`, true), true);
  assert.equal(readsInFileOrder(`csv:${csv}`, false), false);
  // A tokenizer with fewer tokens than the model's embeddings is flagged (padded embeddings, or another model's).
  const other = mkdtempSync(join(tmpdir(), "attnlip-hf-smalltok-"));
  cpSync(dir("gpt2"), other, { recursive: true });
  cpSync(join(dir("bert"), "tokenizer.json"), join(other, "tokenizer.json"));
  const hf = await loadHfModel(other, "analyze");
  const warnings: string[] = [];
  await hfTextTokenizer(other, hf.config as TextConfig, hf.hfConfig, "analyze", (l) => warnings.push(l));
  hf.model.dispose();
  assert.match(warnings.join("\n"), /analyze: warning: .*tokenizer.json has 160 tokens, the model 300 word embeddings/);
  // A malformed id2label is refused before the weights load, naming what is wrong.
  for (const [id2label, message] of [
    [{ 0: "spam", 1: "spam" }, /id2label names two classes "spam" \(ids 0 and 1\)/],
    [{ a: "spam", b: "ham" }, /id2label: its keys must be the class ids 0 to 1, got key "a"/],
    [{ 0: "spam", 2: "ham" }, /id2label: its keys must be the class ids 0 to 1, got key "2"/],
    [{ 0: "spam", 1: 7 }, /id2label\["1"\] must be a string \(the class name\), got 7/],
  ] as const) {
    writeFileSync(join(d, "config.json"), JSON.stringify({ ...config, id2label, label2id: undefined }));
    await assert.rejects(loadHfModel(d, "analyze"), (e: Error) => (assert.match(e.message, message), true));
  }
  // Weights without config.json are named as a Hugging Face folder's problem, not a checkpoint's.
  const noConfig = mkdtempSync(join(tmpdir(), "attnlip-hf-noconfig-"));
  cpSync(join(dir("bert"), "model.safetensors"), join(noConfig, "model.safetensors"));
  const r = await runAttnlipHere(["analyze", noConfig, "--n", "1"]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /^attnlip: analyze: .*: no config.json; a Hugging Face folder needs the config.json that save_pretrained writes/);
});
