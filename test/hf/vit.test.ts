// Hugging Face ViTForImageClassification import, checked against test/fixtures/hf/vit-tiny-random:
// a tiny random model written by transformers' save_pretrained, with logits, attention maps and
// exact Jacobian spectral norms computed by the library itself in float64 (reference.json).
import { test } from "node:test";
import assert from "node:assert/strict";
import { cpSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { tf, useBackend } from "../../src/backend.ts";
import { isHfFolder, loadHfModel } from "../../src/hf/load.ts";
import { HfImportError } from "../../src/hf/types.ts";
import { encodeSafetensors } from "../../src/io/safetensors.ts";
import { readSafetensors } from "../../src/io/safetensorsFile.ts";
import { networkBounds } from "../../src/lipschitz/networkBounds.ts";
import { networkLipschitz } from "../../src/lipschitz/truth/inputJacobian.ts";
import { blockLipschitz } from "../../src/lipschitz/truth/powerIteration.ts";
import type { TransformerClassifier } from "../../src/nn/model.ts";
import { disposeTrace } from "../../src/nn/trace.ts";
import type { VitConfig } from "../../src/nn/config.ts";
import { vitForward64 } from "../helpers/reference64.ts";
import { runAttnlip, runAttnlipHere } from "../helpers/cli.ts";

const DIR = new URL("../fixtures/hf/vit-tiny-random", import.meta.url).pathname;

interface VitReference {
  inputs: { pixel_values: number[][][][] };
  logits: number[][];
  attentions: number[][][];
  attention_shape: number[];
  jacobian_spectral_norm: number[];
  layer_jacobian_spectral_norm: number[][];
}
const ref = JSON.parse(readFileSync(join(DIR, "reference.json"), "utf8")) as VitReference;

/** pixel_values [B, C, H, W] as attnlip's images [B, H, W, C]. */
function images(): tf.Tensor4D {
  const pv = ref.inputs.pixel_values;
  const [b, c, h, w] = [pv.length, pv[0].length, pv[0][0].length, pv[0][0][0].length];
  const out = new Float32Array(b * h * w * c);
  for (let i = 0; i < b; i++)
    for (let ch = 0; ch < c; ch++)
      for (let y = 0; y < h; y++) for (let x = 0; x < w; x++) out[((i * h + y) * w + x) * c + ch] = pv[i][ch][y][x];
  return tf.tensor4d(out, [b, h, w, c]);
}

test("a Hugging Face ViT folder imports as a ViT with exact GELU and the config's LayerNorm eps", async () => {
  await useBackend("wasm");
  assert.equal(await isHfFolder(DIR), true);
  const { model, config, architecture } = await loadHfModel(DIR, "analyze");
  try {
    assert.equal(architecture, "ViTForImageClassification");
    assert.equal(config.kind, "vit");
    assert.equal(config.activation, "gelu-erf");
    assert.equal(config.lnEps, 1e-12);
    assert.deepEqual([config.dModel, config.heads, config.blocks, config.mlpHidden, config.classes], [32, 4, 2, 64, 10]);
  } finally {
    model.dispose();
  }
});

// The reference is transformers' float64 pass; attnlip's tensors are float32 (measured: logits
// within 8e-7, attention within 4e-7). The tanh GELU in place of the exact one moves the logits
// by 4e-4 and block 1's attention by 1e-4, so these tolerances tell the two forms apart.
const F32_LOGITS = 1e-4;
const F32_ATTENTION = 1e-5;
const F32_RELATIVE = 1e-4;

test("imported weights: attnlip's float64 forward pass gives transformers' logits within 1e-6", async () => {
  await useBackend("wasm");
  const { model, config } = await loadHfModel(DIR, "analyze");
  try {
    const weights = (model as TransformerClassifier).getWeights();
    ref.inputs.pixel_values.forEach((image, i) => {
      const logits = vitForward64(config as VitConfig, weights, image.flat(2)).logits;
      ref.logits[i].forEach((v, j) => assert.ok(Math.abs(v - logits[j]) <= 1e-6, `input ${i} logit ${j}: ${logits[j]} vs ${v}`));
    });
  } finally {
    model.dispose();
  }
});

test("imported ViT: logits within 1e-4 and attention maps within 1e-5 of transformers' own", async () => {
  await useBackend("wasm");
  const { model } = await loadHfModel(DIR, "analyze");
  const x = images();
  try {
    const { logits, trace } = (model as TransformerClassifier).forward(x, { trace: true });
    const got = logits.arraySync() as number[][];
    let worst = 0;
    ref.logits.forEach((row, i) => row.forEach((v, j) => (worst = Math.max(worst, Math.abs(v - got[i][j])))));
    assert.ok(worst <= F32_LOGITS, `logits differ by ${worst}`);
    const [b, heads, n] = ref.attention_shape;
    ref.attentions.forEach((rows, layer) => {
      const p = trace!.blocks[layer].attn.p.dataSync();
      assert.equal(p.length, b * heads * n * n);
      let w = 0;
      rows.forEach((row, r) => row.forEach((v, j) => (w = Math.max(w, Math.abs(v - p[r * n + j])))));
      assert.ok(w <= F32_ATTENTION, `layer ${layer}: attention differs by ${w}`);
    });
    logits.dispose();
    disposeTrace(trace!);
  } finally {
    x.dispose();
    model.dispose();
  }
});

test("imported ViT: network and per-layer true values within 1e-4 of the reference, every bound variant above the layer values", async () => {
  await useBackend("wasm");
  const { model } = await loadHfModel(DIR, "analyze");
  const vit = model as TransformerClassifier;
  const x = images();
  try {
    const network = networkLipschitz(vit, x);
    ref.jacobian_spectral_norm.forEach((v, i) =>
      assert.ok(Math.abs(network[i] - v) <= F32_RELATIVE * v, `input ${i}: network ${network[i]} vs ${v}`),
    );
    const { logits, trace } = vit.forward(x, { trace: true });
    logits.dispose();
    const bounds = networkBounds(vit, trace!);
    ref.layer_jacobian_spectral_norm.forEach((layers, i) =>
      layers.forEach((v, layer) => {
        const input = tf.slice(trace!.blocks[layer].input, [i, 0, 0], [1, -1, -1]);
        const est = blockLipschitz(vit, layer, input, null, { tolerance: 1e-7 });
        input.dispose();
        assert.ok(est.converged, `input ${i} layer ${layer}: not converged`);
        assert.ok(Math.abs(est.value - v) <= F32_RELATIVE * v, `input ${i} layer ${layer}: ${est.value} vs ${v}`);
        for (const [name, bound] of Object.entries(bounds.examples[i].blocks[layer].block))
          assert.ok(bound >= v, `input ${i} layer ${layer}: ${name} ${bound} < ${v}`);
      }),
    );
    disposeTrace(trace!);
  } finally {
    x.dispose();
    model.dispose();
  }
});

test("Hugging Face folders attnlip cannot import are refused with one line naming the problem", async () => {
  const copy = (edit: (config: Record<string, unknown>) => void) => {
    const dir = mkdtempSync(join(tmpdir(), "attnlip-hf-"));
    cpSync(DIR, dir, { recursive: true });
    const config = JSON.parse(readFileSync(join(dir, "config.json"), "utf8")) as Record<string, unknown>;
    edit(config);
    writeFileSync(join(dir, "config.json"), JSON.stringify(config));
    return dir;
  };
  const refused = async (dir: string, pattern: RegExp) => {
    await assert.rejects(loadHfModel(dir, "analyze"), (e: Error) => {
      assert.ok(e instanceof HfImportError, e.message);
      assert.match(e.message, pattern);
      assert.ok(!e.message.includes("\n"));
      return true;
    });
  };
  await refused(copy((c) => (c.architectures = ["SwinForImageClassification"])), /architecture SwinForImageClassification is not supported; attnlip imports ViTForImageClassification/);
  await refused(copy((c) => delete c.architectures), /names no architecture/);
  await refused(copy((c) => (c.hidden_act = "relu")), /hidden_act "relu" is not supported/);
  await refused(copy((c) => (c.num_hidden_layers = 3)), /model.safetensors has no tensor "vit.encoder.layer.2/);
  await refused(copy((c) => (c.num_hidden_layers = 1)), /holds tensors a ViTForImageClassification does not use \(vit.encoder.layer.1/);
  await refused(copy((c) => (c.hidden_size = "32")), /"hidden_size" must be a positive integer, got "32"/);
  await refused(copy((c) => (c.patch_size = 5)), /image_size 28 is not a multiple of patch_size 5/);
  await refused(copy((c) => delete c.hidden_size), /config.json: "hidden_size" is missing/);
  await refused(copy((c) => (c.hidden_size = 32.5)), /"hidden_size" must be a positive integer, got 32.5/);
  await refused(copy((c) => (c.patch_size = 0)), /"patch_size" must be a positive integer, got 0/);
  await refused(copy((c) => (c.layer_norm_eps = -1)), /"layer_norm_eps" must be a finite number > 0, got -1/);
  const huge = copy(() => {});
  writeFileSync(join(huge, "config.json"), readFileSync(join(huge, "config.json"), "utf8").replace(/"hidden_size":\s*\d+/, '"hidden_size": 1e400'));
  await refused(huge, /"hidden_size" must be a positive integer, got Infinity \(a number beyond float64's range\)/);
  await refused(copy((c) => (c.architectures = "ViTForImageClassification")), /"architectures" must be a list of class names/);
  await refused(copy((c) => (c.model_type = "deit")), /model_type "deit" does not match architecture ViTForImageClassification/);
  // Unreadable config.json: the folder is still taken for a Hugging Face one, and the line names config.json.
  const broken = copy(() => {});
  writeFileSync(join(broken, "config.json"), "{ not json");
  assert.equal(await isHfFolder(broken), true);
  await refused(broken, /config.json: /);
  // A weight that is not finite is named where the file is read.
  const nan = copy(() => {});
  const { tensors } = await readSafetensors(join(nan, "model.safetensors"));
  const w = tensors.get("vit.encoder.layer.1.output.dense.weight")!;
  w.data[7] = Number.NaN;
  writeFileSync(join(nan, "model.safetensors"), encodeSafetensors(new Map([...tensors].map(([k, t]) => [k, { data: t.data, shape: t.shape }]))));
  await refused(nan, /tensor "vit.encoder.layer.1.output.dense.weight" holds NaN at flat index 7 \(as F32\); its weights must be finite/);
  assert.equal(await isHfFolder(join(DIR, "missing")), false);
});

test("attnlip analyze and attack take a Hugging Face folder: the output names it and says the model was imported", async () => {
  // Without --out nothing is written into the Hugging Face folder (someone else's, often a cache).
  const copyDir = mkdtempSync(join(tmpdir(), "attnlip-hf-copy-"));
  cpSync(DIR, copyDir, { recursive: true });
  const r = runAttnlip(["analyze", copyDir, "--n", "2", "--no-head-truth", "--no-block-truth"]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /analyzing .* \(Hugging Face ViTForImageClassification\) on 2 test inputs/);
  assert.match(r.stdout, /imported model, not trained by attnlip/);
  assert.match(r.stdout, /give --out DIR to write analysis.json/);
  assert.deepEqual(readdirSync(copyDir).sort(), ["config.json", "model.safetensors", "reference.json"]);
  const out = mkdtempSync(join(tmpdir(), "attnlip-hf-run-"));
  const a = await runAttnlipHere(["attack", DIR, "--n", "4", "--eps", "0.05", "--attack", "fgsm", "--out", join(out, "attack.json")]);
  assert.equal(a.code, 0, a.stderr);
  const attack = JSON.parse(readFileSync(join(out, "attack.json"), "utf8")) as { split: { origin: string }; model: { activation: string } };
  assert.equal(attack.split.origin, "imported");
  assert.equal(attack.model.activation, "gelu-erf");
  // A model with fewer classes than the data is refused before any work.
  const twoLabels = mkdtempSync(join(tmpdir(), "attnlip-hf-2labels-"));
  cpSync(DIR, twoLabels, { recursive: true });
  const config = JSON.parse(readFileSync(join(twoLabels, "config.json"), "utf8")) as Record<string, unknown>;
  config.id2label = { 0: "a", 1: "b" };
  writeFileSync(join(twoLabels, "config.json"), JSON.stringify(config));
  const { tensors } = await readSafetensors(join(twoLabels, "model.safetensors"));
  const head = tensors.get("classifier.weight")!;
  tensors.set("classifier.weight", { ...head, data: head.data.slice(0, 2 * 32), shape: [2, 32] });
  tensors.set("classifier.bias", { ...tensors.get("classifier.bias")!, data: new Float32Array(2), shape: [2] });
  writeFileSync(join(twoLabels, "model.safetensors"), encodeSafetensors(new Map([...tensors].map(([k, t]) => [k, { data: t.data, shape: t.shape }]))));
  const r2 = await runAttnlipHere(["attack", twoLabels, "--n", "4"]);
  assert.equal(r2.code, 2, r2.stderr);
  assert.match(r2.stderr, /^attnlip: attack: --data: mnist has 10 classes, the model only 2/);
  const bad = mkdtempSync(join(tmpdir(), "attnlip-hf-bad-"));
  writeFileSync(join(bad, "config.json"), JSON.stringify({ model_type: "bert", architectures: ["BertForMaskedLM"] }));
  const refused = await runAttnlipHere(["analyze", bad, "--n", "2"]);
  assert.equal(refused.code, 2, refused.stderr);
  assert.equal(refused.stderr.trim().split("\n").length, 1, refused.stderr);
  assert.match(refused.stderr, /analyze: .*: architecture BertForMaskedLM is not supported; attnlip imports ViTForImageClassification/);
});
