// Export to the Hugging Face format: an imported folder exported again gives the same tensors
// (bit for bit), config and tokenizer; fine-tuning an imported model writes RUN/hf, which
// imports back to the checkpoint's function; an attnlip ViT exports as ViTForImageClassification.
import { test } from "node:test";
import assert from "node:assert/strict";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { tf, useBackend } from "../../src/backend.ts";
import { loadHfModel } from "../../src/hf/load.ts";
import { networkBounds } from "../../src/lipschitz/networkBounds.ts";
import { networkLipschitz } from "../../src/lipschitz/truth/inputJacobian.ts";
import { disposeTrace } from "../../src/nn/trace.ts";
import { encodeSafetensors } from "../../src/io/safetensors.ts";
import { readSafetensors } from "../../src/io/safetensorsFile.ts";
import type { TransformerClassifier } from "../../src/nn/model.ts";
import { loadCheckpoint } from "../../src/train/checkpoint.ts";
import { train } from "../../src/train/trainer.ts";
import { exportModel } from "../../src/pipelines/exportRun.ts";
import { runAttnlip, runAttnlipHere } from "../helpers/cli.ts";

const dir = (m: string) => new URL(`../fixtures/hf/${m}-tiny-random`, import.meta.url).pathname;
const json = (path: string) => JSON.parse(readFileSync(path, "utf8")) as unknown;

async function sameTensors(a: string, b: string): Promise<void> {
  const [x, y] = [(await readSafetensors(a)).tensors, (await readSafetensors(b)).tensors];
  assert.deepEqual([...x.keys()].sort(), [...y.keys()].sort());
  for (const [name, t] of x) {
    const u = y.get(name)!;
    assert.deepEqual(u.shape, t.shape, name);
    assert.equal(u.dtype, t.dtype, name);
    assert.deepEqual(new Uint32Array(u.data.buffer, u.data.byteOffset, u.data.length), new Uint32Array(t.data.buffer, t.data.byteOffset, t.data.length), name);
  }
}

test("attnlip export of a Hugging Face folder gives the same tensors bit for bit, the same config and tokenizer; an existing export is kept unless --force", async () => {
  const work = mkdtempSync(join(tmpdir(), "attnlip-export-"));
  for (const m of ["vit", "bert", "gpt2"]) {
    const out = join(work, m);
    // The first as a user runs it; the others in this process.
    const r = m === "vit" ? runAttnlip(["export", dir(m), "--format", "hf", "--out", out]) : await runAttnlipHere(["export", dir(m), "--format", "hf", "--out", out]);
    assert.equal(r.code, 0, r.stderr);
    await sameTensors(join(dir(m), "model.safetensors"), join(out, "model.safetensors"));
    assert.deepEqual(json(join(out, "config.json")), json(join(dir(m), "config.json")));
    if (m !== "vit") assert.deepEqual(json(join(out, "tokenizer.json")), json(join(dir(m), "tokenizer.json")));
  }
  const again = await runAttnlipHere(["export", dir("bert"), "--out", join(work, "bert")]);
  assert.equal(again.code, 2);
  assert.match(again.stderr, /^attnlip: export: --out: .* holds config.json already; choose another folder or give --force/);
  writeFileSync(join(work, "bert", "vocab.txt"), "another model's vocabulary\n");
  const forced = await runAttnlipHere(["export", dir("bert"), "--out", join(work, "bert"), "--force"]);
  assert.equal(forced.code, 0);
  assert.match(forced.stderr, /export: warning: .* also holds vocab\.txt, not written by this export; remove them if they belong to another model/);
  const bad = [
    [["export", dir("bert"), "--format", "onnx", "--out", join(work, "x")], /--format: "onnx" is not a format attnlip writes/],
    [["export", dir("bert")], /--out DIR/],
    [["export", work, "--out", join(work, "z")], /holds neither a training checkpoint nor a Hugging Face model/],
  ] as const;
  for (const [args, pattern] of bad) {
    const b = await runAttnlipHere([...args]);
    assert.equal(b.code, 2, `${args.join(" ")}: ${b.stderr}`);
    assert.match(b.stderr, pattern);
    assert.equal(b.stderr.trim().split("\n").length, 1);
  }
  await assert.rejects(exportModel(dir("bert"), dir("bert"), false), /is the source folder/);
  await assert.rejects(exportModel(join(work, "missing"), join(work, "y"), false), /is not a folder/);
  writeFileSync(join(work, "file"), "");
  await assert.rejects(exportModel(dir("bert"), join(work, "file"), false), /--out: .* is a file; give a folder/);
});

/** Logits of a model on some ids (text) or images. */
function logitsOf(model: TransformerClassifier, x: tf.Tensor, mask?: tf.Tensor): Float32Array {
  const { logits } = model.forward(x, { mask });
  const out = logits.dataSync() as Float32Array;
  logits.dispose();
  return out;
}

test("fine-tuning an imported BERT writes RUN/hf, which imports back to the checkpoint's logits; resuming keeps the Hugging Face tokenizer", async () => {
  await useBackend("wasm");
  const work = mkdtempSync(join(tmpdir(), "attnlip-finetune-"));
  const csv = join(work, "texts.csv");
  const rows = ["text,label"];
  for (let i = 0; i < 40; i++) rows.push(i % 2 ? `free money now click here ${i},spam` : `the meeting is on thursday ${i},ham`);
  writeFileSync(csv, rows.join("\n") + "\n");
  const out = join(work, "run");
  const r = await train({ data: `csv:${csv}`, model: dir("bert"), epochs: 1, batchSize: 16, jasmin: { lambda: 0.1 }, out, progress: "none", log: () => {} });
  r.model.dispose();
  const ckpt = await loadCheckpoint(out);
  assert.deepEqual(ckpt.trainState.pretrained, { source: "huggingface", path: dir("bert"), architecture: "BertForSequenceClassification" });
  assert.deepEqual(ckpt.hfConfig, json(join(dir("bert"), "config.json")));
  const hf = await loadHfModel(join(out, "hf"), "analyze");
  const ids = tf.tensor2d([[2, 20, 30, 40, 3, 0], [2, 50, 3, 0, 0, 0]], [2, 6], "int32");
  const mask = tf.tensor2d([[1, 1, 1, 1, 1, 0], [1, 1, 1, 0, 0, 0]], [2, 6]);
  try {
    const a = logitsOf(ckpt.model as TransformerClassifier, ids, mask);
    const b = logitsOf(hf.model as TransformerClassifier, ids, mask);
    assert.deepEqual(b, a);
    const original = await loadHfModel(dir("bert"), "analyze");
    assert.notDeepEqual(logitsOf(original.model as TransformerClassifier, ids, mask), a, "training changed nothing");
    original.model.dispose();
  } finally {
    tf.dispose([ids, mask]);
    hf.model.dispose();
    ckpt.model.dispose();
  }
  assert.deepEqual(json(join(out, "hf", "tokenizer.json")), json(join(dir("bert"), "tokenizer.json")));
  const resumed = await train({ resume: out, epochs: 2, progress: "none", log: () => {} });
  assert.equal(resumed.trainState.epoch, 2);
  resumed.model.dispose();
  // More classes in the data than the model's classifier has is refused before training.
  const three = join(work, "three.csv");
  writeFileSync(three, "text,label\n" + Array.from({ length: 30 }, (_, i) => `text ${i},${["a", "b", "c"][i % 3]}`).join("\n") + "\n");
  await assert.rejects(train({ data: `csv:${three}`, model: dir("bert"), epochs: 1, progress: "none", log: () => {} }), /data csv:.* has 3 classes \(a, b, c\), the model's classifier only 2/);
});

test("an attnlip ViT exports as ViTForImageClassification with the same logits; attnlip's own text models are refused", async () => {
  await useBackend("wasm");
  const work = mkdtempSync(join(tmpdir(), "attnlip-export-vit-"));
  const run = join(work, "run");
  const r = await train({ data: "mnist", model: "vit-micro", limit: 64, testLimit: 32, epochs: 1, out: run, progress: "none", log: () => {} });
  r.model.dispose();
  const e = await runAttnlipHere(["export", run, "--out", join(work, "hf")]);
  assert.equal(e.code, 0, e.stderr);
  const config = json(join(work, "hf", "config.json")) as Record<string, unknown>;
  assert.equal(config.hidden_act, "gelu_pytorch_tanh");
  assert.equal(Object.keys(config.id2label as object).length, 10);
  const ckpt = await loadCheckpoint(run);
  const hf = await loadHfModel(join(work, "hf"), "analyze");
  const x = tf.randomUniform([2, 28, 28, 1], 0, 1, "float32", 3);
  try {
    assert.deepEqual(logitsOf(hf.model as TransformerClassifier, x), logitsOf(ckpt.model as TransformerClassifier, x));
  } finally {
    x.dispose();
    hf.model.dispose();
    ckpt.model.dispose();
  }
  const textRun = join(work, "text");
  const csv = join(work, "t.csv");
  writeFileSync(csv, "text,label\n" + Array.from({ length: 20 }, (_, i) => `word${i % 3} text,${i % 2}`).join("\n") + "\n");
  const t = await train({ data: `csv:${csv}`, model: "text-tiny", epochs: 1, out: textRun, progress: "none", log: () => {} });
  t.model.dispose();
  const refused = await runAttnlipHere(["export", textRun, "--out", join(work, "text-hf")]);
  assert.equal(refused.code, 2);
  assert.match(refused.stderr, /attnlip's own text models .* have no Hugging Face architecture/);
});

test("export keeps a float16 model's dtype, names a fine-tuned run's classes, replaces an earlier sharded export, and refuses an --out under a file; fine-tuning refuses a text without tokens", async () => {
  await useBackend("wasm");
  const work = mkdtempSync(join(tmpdir(), "attnlip-export-more-"));
  // A float16 copy of the BERT fixture: the export writes F16 again, bit for bit.
  const f16 = join(work, "f16");
  mkdirSync(f16);
  const { tensors } = await readSafetensors(join(dir("bert"), "model.safetensors"));
  const half = new Map([...tensors].map(([k, t]) => [k, { data: t.data, shape: t.shape }]));
  writeFileSync(join(f16, "model.safetensors"), encodeSafetensors(half, { format: "pt" }, { dtype: "F16" }));
  const config = json(join(dir("bert"), "config.json")) as Record<string, unknown>;
  writeFileSync(join(f16, "config.json"), JSON.stringify({ ...config, dtype: "float16" }));
  cpSync(join(dir("bert"), "tokenizer.json"), join(f16, "tokenizer.json"));
  await exportModel(f16, join(work, "f16-out"), false);
  assert.deepEqual(readFileSync(join(work, "f16-out", "model.safetensors")), readFileSync(join(f16, "model.safetensors")));
  // A dtype attnlip does not write (float64) is exported as float32 and labelled so.
  writeFileSync(join(f16, "config.json"), JSON.stringify({ ...config, torch_dtype: "float64" }));
  await exportModel(f16, join(work, "f64-out"), false);
  assert.equal((json(join(work, "f64-out", "config.json")) as Record<string, unknown>).torch_dtype, "float32");
  assert.equal((await readSafetensors(join(work, "f64-out", "model.safetensors"))).tensors.values().next().value!.dtype, "F32");
  // A run fine-tuned from a model with placeholder labels exports its data's class names.
  const csv = join(work, "t.csv");
  writeFileSync(csv, "text,label\n" + Array.from({ length: 30 }, (_, i) => `${i % 2 ? "free money" : "the meeting"} ${i},${i % 2 ? "spam" : "ham"}`).join("\n") + "\n");
  const run = join(work, "run");
  const r = await train({ data: `csv:${csv}`, model: dir("bert"), epochs: 1, out: run, progress: "none", log: () => {} });
  r.model.dispose();
  const exported = json(join(run, "hf", "config.json")) as Record<string, unknown>;
  assert.deepEqual(exported.id2label, { 0: "ham", 1: "spam" });
  assert.deepEqual(exported.label2id, { ham: 0, spam: 1 });
  // --force over an earlier sharded export leaves no stale shard or index behind.
  const out = join(work, "out");
  mkdirSync(out);
  writeFileSync(join(out, "model-00001-of-00002.safetensors"), "");
  writeFileSync(join(out, "model.safetensors.index.json"), JSON.stringify({ weight_map: { a: "model-00001-of-00002.safetensors" } }));
  writeFileSync(join(out, "config.json"), "{}");
  await exportModel(run, out, true);
  assert.deepEqual(readdirSync(out).sort(), ["config.json", "model.safetensors", "tokenizer.json"]);
  writeFileSync(join(work, "file"), "");
  await assert.rejects(exportModel(run, join(work, "file", "sub"), false), /^InputError: export: --out: cannot create .*file\/sub/);
  // GPT-2's tokenizer adds no special token: an empty text has no token and is refused before training.
  const empty = join(work, "empty.csv");
  writeFileSync(empty, "text,label\n" + Array.from({ length: 10 }, (_, i) => `${i === 4 ? "" : `text ${i}`},${i % 2}`).join("\n") + "\n");
  await assert.rejects(train({ data: `csv:${empty}`, model: dir("gpt2"), epochs: 1, progress: "none", log: () => {} }), /record 5 has no tokens under this model's tokenizer/);
});

test("base models (ViTModel, BertModel, GPT2Model) import with a random head added (said on stderr), bound above their true values, and export back without it", async () => {
  await useBackend("wasm");
  const work = mkdtempSync(join(tmpdir(), "attnlip-hf-base-"));
  const bases = [
    ["vit", "ViTModel", "vit."],
    ["bert", "BertModel", "bert."],
    ["gpt2", "GPT2Model", "transformer."],
  ] as const;
  for (const [m, name, prefix] of bases) {
    const base = join(work, name);
    mkdirSync(base);
    const { tensors } = await readSafetensors(join(dir(m), "model.safetensors"));
    const kept = new Map<string, { data: Float32Array; shape: number[] }>();
    for (const [k, t] of tensors) if (k.startsWith(prefix)) kept.set(k.slice(prefix.length), { data: t.data, shape: t.shape });
    if (m === "vit") {
      const d = 32;
      kept.set("pooler.dense.weight", { data: Float32Array.from({ length: d * d }, (_, i) => Math.sin(i) / 8), shape: [d, d] });
      kept.set("pooler.dense.bias", { data: new Float32Array(d).fill(0.1), shape: [d] });
    }
    writeFileSync(join(base, "model.safetensors"), encodeSafetensors(kept, { format: "pt" }));
    const config = json(join(dir(m), "config.json")) as Record<string, unknown>;
    delete config.id2label;
    delete config.label2id;
    writeFileSync(join(base, "config.json"), JSON.stringify({ ...config, architectures: [name] }));
    if (m !== "vit") cpSync(join(dir(m), "tokenizer.json"), join(base, "tokenizer.json"));
    const hf = await loadHfModel(base, "analyze");
    const full = await loadHfModel(dir(m), "analyze");
    try {
      assert.equal(hf.addedHead, true);
      const a = full.model.getWeights();
      for (const [k, t] of hf.model.getWeights()) if (!k.startsWith("head.") && !k.startsWith("pooler.")) assert.deepEqual(t.data, a.get(k)!.data, `${name}: ${k}`);
      const model = hf.model as TransformerClassifier;
      const x = m === "vit" ? tf.randomUniform([1, 28, 28, 1], 0, 1, "float32", 5) : tf.tensor2d([[2, 20, 30, 40, 3]], [1, 5], "int32");
      const { logits, trace } = model.forward(x, { trace: true });
      logits.dispose();
      const truth = networkLipschitz(model, x)[0];
      const bounds = networkBounds(model, trace!).examples[0];
      for (const [v, b] of Object.entries(bounds.network)) assert.ok(b >= truth, `${name}: ${v} ${b} < ${truth}`);
      assert.equal(bounds.layers.some((l) => l.kind === "pooler"), m !== "gpt2");
      disposeTrace(trace!);
      x.dispose();
    } finally {
      hf.model.dispose();
      full.model.dispose();
    }
    await exportModel(base, join(work, `${name}-out`), false);
    await sameTensors(join(base, "model.safetensors"), join(work, `${name}-out`, "model.safetensors"));
  }
  const r = await runAttnlipHere(["analyze", join(work, "BertModel"), "--data", `csv:${new URL("../fixtures/hf/texts.csv", import.meta.url).pathname}`, "--n", "1", "--no-head-truth", "--no-block-truth"]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stderr, /analyze: warning: BertModel has no classifier: attnlip added a linear head on its pooled output \(random, seed 0\)/);
  assert.match(r.stdout, /\(Hugging Face BertModel, with a random linear head added\)/);
});

test("an export never replaces a training checkpoint (--force, or a link to the source); a base model saved without its pooler reads the first token; a file at RUN/hf is refused before fine-tuning", async () => {
  await useBackend("wasm");
  const work = mkdtempSync(join(tmpdir(), "attnlip-export-guard-"));
  const run = join(work, "run");
  const r = await train({ data: "mnist", model: "vit-micro", limit: 32, testLimit: 16, epochs: 1, out: run, progress: "none", log: () => {} });
  r.model.dispose();
  const before = readFileSync(join(run, "model.safetensors"));
  await assert.rejects(exportModel(dir("vit"), run, true), /--out: .*run holds a training checkpoint \(train_state.json\); an export never replaces one/);
  symlinkSync(run, join(work, "link"));
  await assert.rejects(exportModel(run, join(work, "link"), true), /is the source folder/);
  assert.deepEqual(readFileSync(join(run, "model.safetensors")), before);
  // BertModel saved with add_pooling_layer=False: no pooler tensors, the head reads [CLS].
  const base = join(work, "bert-nopool");
  mkdirSync(base);
  const { tensors } = await readSafetensors(join(dir("bert"), "model.safetensors"));
  const kept = new Map<string, { data: Float32Array; shape: number[] }>();
  for (const [k, t] of tensors) if (k.startsWith("bert.") && !k.startsWith("bert.pooler.")) kept.set(k.slice(5), { data: t.data, shape: t.shape });
  writeFileSync(join(base, "model.safetensors"), encodeSafetensors(kept));
  writeFileSync(join(base, "config.json"), JSON.stringify({ ...(json(join(dir("bert"), "config.json")) as object), architectures: ["BertModel"] }));
  cpSync(join(dir("bert"), "tokenizer.json"), join(base, "tokenizer.json"));
  const hf = await loadHfModel(base, "analyze");
  assert.equal(hf.config.kind === "text" ? hf.config.pooler : "?", undefined);
  hf.model.dispose();
  // RUN/hf is where the fine-tuned model goes: a file there is refused before any training.
  const blocked = join(work, "blocked");
  mkdirSync(blocked);
  writeFileSync(join(blocked, "hf"), "x");
  const csv = join(work, "t.csv");
  writeFileSync(csv, "text,label\n" + Array.from({ length: 20 }, (_, i) => `text ${i},${i % 2}`).join("\n") + "\n");
  await assert.rejects(train({ data: `csv:${csv}`, model: dir("bert"), epochs: 1, out: blocked, progress: "none", log: () => {}, warn: () => {} }), /blocked\/hf is a file; a fine-tuned Hugging Face model is written there/);
  assert.ok(!existsSync(join(blocked, "model.safetensors")), "nothing trained");
});
