// The walker networkBounds over traced tfjs forward passes of small ViT and text models, against
// dense input Jacobians of the float64 reference logits (test/helpers/reference64.ts).
import { test, before } from "node:test";
import assert from "node:assert/strict";
import { tf, useBackend } from "../../src/backend.ts";
import { createModel, disposeTrace, type Model } from "../../src/nn/index.ts";
import type { TextConfig, VitConfig } from "../../src/nn/config.ts";
import { block64, encoderHead64, layerNorm64, mlp64, vitForward64 } from "../helpers/reference64.ts";
import { HEAD_VARIANTS } from "../../src/lipschitz/rules/attentionHead.ts";
import { networkBounds } from "../../src/lipschitz/networkBounds.ts";
import {
  fdJacobian,
  mulberry32,
  pick,
  randomWeights,
  sigmaMax,
  type Rand,
} from "./rulesHelpers.ts";

const TOL = 1e-4;
// Central finite differences in float64 (step 1e-6) carry an absolute error near 1e-10: where
// the true value is about 0 (a network whose output is locally constant), exact rules (row-wise
// runs) may sit that far below the estimated truth.
const FD_ABS = 1e-8;

before(async () => {
  await useBackend("cpu");
});

function randomEncoder(rand: Rand) {
  const heads = pick(rand, [1, 2]);
  const dk = pick(rand, [2, 3, 4]);
  return {
    dModel: heads * dk,
    heads,
    blocks: pick(rand, [1, 2]),
    mlpHidden: 2 + Math.floor(rand() * 8),
    classes: pick(rand, [2, 3]),
    qkvBias: rand() < 0.5,
    norm: pick(rand, ["pre", "post"] as const),
    lnEps: pick(rand, [1e-5, 1e-3]),
  };
}

function withRandomWeights(
  model: Model,
  rand: Rand,
  scale: number,
  extra: Record<string, number[]>,
): void {
  const c = model.config;
  model.setWeights(randomWeights(rand, c, scale, c.qkvBias, extra));
}

test("ViT: every network variant >= the true input-Jacobian norm of the logits (100 configs); blocks too", () => {
  const rand = mulberry32(71);
  const before = tf.memory().numTensors;
  for (let t = 0; t < 100; t++) {
    const channels = pick(rand, [1, 2]);
    const patchSize = 2;
    const imageSize = pick(rand, [2, 4]);
    const cfg = { kind: "vit" as const, imageSize, channels, patchSize, ...randomEncoder(rand) };
    const model = createModel(cfg);
    const c = model.config as VitConfig;
    const N = (imageSize / patchSize) ** 2;
    const patchDim = patchSize * patchSize * channels;
    withRandomWeights(model, rand, pick(rand, [0.3, 1, 3]), {
      "patch.w": [patchDim, c.dModel],
      "patch.b": [c.dModel],
      cls: [1, c.dModel],
      pos: [N + 1, c.dModel],
    });
    const weights = model.getWeights();
    const D = imageSize * imageSize * channels;
    const images = Float32Array.from({ length: 2 * D }, () => rand() * pick(rand, [1, 3]));
    const x = tf.tensor2d(images, [2, D]);
    const { logits, trace } = model.forward(x, { trace: true });
    assert.ok(trace);
    const nb = networkBounds({ config: c, weights }, trace);
    assert.equal(nb.inputSpace, "image");
    for (let e = 0; e < 2; e++) {
      const img = Float64Array.from(images.subarray(e * D, (e + 1) * D));
      const truth = sigmaMax(
        fdJacobian((z) => vitForward64(c, weights, z).logits, img, 1e-6),
        c.classes,
        D,
      );
      const ex = nb.examples[e];
      for (const name of HEAD_VARIANTS) {
        assert.ok(Number.isFinite(ex.network[name]), name);
        assert.ok(
          ex.network[name] >= truth * (1 - TOL) - FD_ABS,
          `case ${t}.${e}: ${name} ${ex.network[name]} < ${truth}`,
        );
      }
      // Each block's bound at its traced input.
      const n = N + 1;
      for (let i = 0; i < c.blocks; i++) {
        const input = Float64Array.from(
          trace.blocks[i].input.dataSync().subarray(e * n * c.dModel, (e + 1) * n * c.dModel),
        );
        const bt = sigmaMax(
          fdJacobian((z) => block64(z, n, c, weights, i).out, input, 1e-6),
          n * c.dModel,
          n * c.dModel,
        );
        for (const name of HEAD_VARIANTS)
          assert.ok(
            ex.blocks[i].block[name] >= bt * (1 - TOL) - FD_ABS,
            `case ${t}.${e} block ${i}: ${name}`,
          );
        assert.equal(ex.blocks[i].heads.length, c.heads);
      }
    }
    logits.dispose();
    disposeTrace(trace);
    x.dispose();
    model.dispose();
  }
  assert.equal(tf.memory().numTensors, before);
});

test("text (padding, causal, cls/mean pooling): every network variant >= the true Jacobian norm w.r.t. the embedded sequence (100 configs)", () => {
  const rand = mulberry32(72);
  for (let t = 0; t < 100; t++) {
    const cfg = {
      kind: "text" as const,
      vocabSize: 10,
      maxLength: 8,
      pooling: pick(rand, ["cls", "mean"] as const),
      causal: rand() < 0.3,
      ...randomEncoder(rand),
    };
    const model = createModel(cfg);
    const c = model.config as TextConfig;
    withRandomWeights(model, rand, pick(rand, [0.3, 1, 3]), {
      tok: [10, c.dModel],
      pos: [8, c.dModel],
    });
    const weights = model.getWeights();
    const n = 2 + Math.floor(rand() * 5);
    const b = 2;
    const ids = tf.tensor2d(
      Int32Array.from({ length: b * n }, () => Math.floor(rand() * 10)),
      [b, n],
      "int32",
    );
    const maskValues = new Float32Array(b * n).fill(1);
    const masked = rand() < 0.6;
    if (masked)
      for (let e = 0; e < b; e++)
        maskValues.fill(0, e * n + 1 + Math.floor(rand() * n), (e + 1) * n);
    const mask = masked ? tf.tensor2d(maskValues, [b, n]) : null;
    const { logits, trace } = model.forward(ids, { trace: true, mask });
    assert.ok(trace);
    const nb = networkBounds(model, trace);
    assert.equal(nb.inputSpace, "embedding");
    const seqAll = trace.embedding.dataSync();
    const d = c.dModel;
    for (let e = 0; e < b; e++) {
      const seq = Float64Array.from(seqAll.subarray(e * n * d, (e + 1) * n * d));
      const m = masked ? maskValues.subarray(e * n, (e + 1) * n) : undefined;
      const truth = sigmaMax(
        fdJacobian((z) => encoderHead64(z, n, c, weights, m).logits, seq, 1e-6),
        c.classes,
        n * d,
      );
      const ex = nb.examples[e];
      assert.equal(ex.embedding, 1);
      for (const name of HEAD_VARIANTS)
        assert.ok(
          ex.network[name] >= truth * (1 - TOL) - FD_ABS,
          `case ${t}.${e}: ${name} ${ex.network[name]} < ${truth}`,
        );
      const realRows = m ? m.reduce((s, v) => s + (v ? 1 : 0), 0) : n;
      for (const bl of ex.blocks)
        for (const h of bl.heads) {
          assert.equal(h.stats.rows, realRows);
          assert.ok(h.stats.maxSigma <= 0.5 && h.stats.meanSigma <= h.stats.maxSigma + 1e-15);
          assert.ok(h.stats.meanTop > 0 && h.stats.meanTop <= 1 + 1e-6 && h.stats.meanEntropy >= 0);
        }
    }
    logits.dispose();
    disposeTrace(trace);
    ids.dispose();
    mask?.dispose();
    model.dispose();
  }
});

/** Random weights for every parameter a model has (LayerNorm gains about 1, others scaled by fan-in). */
function randomizeAll(model: Model, rand: Rand, scale: number): void {
  const out = new Map<string, { data: Float32Array; shape: number[] }>();
  for (const [name, t] of model.getWeights()) {
    const gain = name.endsWith(".gamma");
    const std = gain ? 0.3 : name.endsWith(".beta") || /\.b[a-z0-9]*$/.test(name) ? 0.2 : t.shape.length === 2 && !["tok", "pos", "type"].includes(name) ? scale / Math.sqrt(t.shape[0]) : 0.5;
    out.set(name, { data: Float32Array.from({ length: t.data.length }, () => (gain ? 1 : 0) + std * normal(rand)), shape: [...t.shape] });
  }
  model.setWeights(out);
}

function normal(rand: Rand): number {
  return Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand());
}

test("text with the BERT and GPT-2 layouts (embedding LayerNorm, no final LayerNorm, last-token pooling, tanh pooler, no head bias): every network variant >= the true Jacobian norm (120 configs)", () => {
  const rand = mulberry32(91);
  for (let t = 0; t < 120; t++) {
    const bert = rand() < 0.5;
    const cfg = {
      kind: "text" as const,
      vocabSize: 10,
      maxLength: 8,
      ...randomEncoder(rand),
      ...(bert
        ? { norm: "post" as const, embeddingNorm: true, finalNorm: false, pooler: "tanh" as const, tokenTypes: 2, pooling: pick(rand, ["cls", "mean", "last"] as const) }
        : { norm: "pre" as const, causal: true, headBias: false, pooling: pick(rand, ["last", "cls"] as const), embeddingNorm: rand() < 0.3 }),
      activation: pick(rand, ["gelu-erf", "gelu-tanh"] as const),
    };
    const model = createModel(cfg);
    const c = model.config as TextConfig;
    randomizeAll(model, rand, pick(rand, [0.3, 1, 3]));
    const weights = model.getWeights();
    const n = 2 + Math.floor(rand() * 5);
    const b = 2;
    const ids = tf.tensor2d(Int32Array.from({ length: b * n }, () => Math.floor(rand() * 10)), [b, n], "int32");
    const maskValues = new Float32Array(b * n).fill(1);
    const masked = rand() < 0.6;
    if (masked) for (let e = 0; e < b; e++) maskValues.fill(0, e * n + 1 + Math.floor(rand() * n), (e + 1) * n);
    const mask = masked ? tf.tensor2d(maskValues, [b, n]) : null;
    const { logits, trace } = model.forward(ids, { trace: true, mask });
    assert.ok(trace);
    const nb = networkBounds(model, trace);
    const seqAll = trace.embedding.dataSync();
    const logitsAll = logits.dataSync();
    const d = c.dModel;
    for (let e = 0; e < b; e++) {
      const seq = Float64Array.from(seqAll.subarray(e * n * d, (e + 1) * n * d));
      const m = masked ? maskValues.subarray(e * n, (e + 1) * n) : undefined;
      const ref = encoderHead64(seq, n, c, weights, m).logits;
      ref.forEach((v, k) => assert.ok(Math.abs(v - logitsAll[e * c.classes + k]) < 1e-4 * (1 + Math.abs(v)), `case ${t}.${e}: float64 reference logit ${k} ${v} vs ${logitsAll[e * c.classes + k]}`));
      const truth = sigmaMax(fdJacobian((z) => encoderHead64(z, n, c, weights, m).logits, seq, 1e-6), c.classes, n * d);
      const ex = nb.examples[e];
      for (const name of HEAD_VARIANTS)
        assert.ok(ex.network[name] >= truth * (1 - TOL) - FD_ABS, `case ${t}.${e} (${bert ? "bert" : "gpt2"} layout, ${c.pooling}): ${name} ${ex.network[name]} < ${truth}`);
      const top = ex.layers.map((l) => l.name);
      assert.equal(top.includes("embedding.norm"), c.embeddingNorm === true, `case ${t}: ${top.join(", ")}`);
      assert.equal(top.includes("pool"), c.finalNorm === false);
      assert.equal(top.includes("pooler"), c.pooler === "tanh");
    }
    logits.dispose();
    disposeTrace(trace);
    ids.dispose();
    mask?.dispose();
    model.dispose();
  }
});

test("row-wise runs are exact: the pre-LN MLP residual equals max_i ||I + J_LN,i J_MLP,i||, the post-LN run LN1 -> MLP residual -> LN2 its dense truth; both at most the product of factors (80 blocks)", () => {
  const rand = mulberry32(95);
  for (let t = 0; t < 80; t++) {
    const post = t % 2 === 1;
    const cfg = { kind: "vit" as const, imageSize: 4, channels: 1, patchSize: 2, ...randomEncoder(rand), blocks: 1, norm: post ? ("post" as const) : ("pre" as const), activation: pick(rand, ["gelu-erf", "gelu-tanh"] as const) };
    const model = createModel(cfg);
    const c = model.config as VitConfig;
    randomizeAll(model, rand, pick(rand, [0.3, 1, 3]));
    const weights = model.getWeights();
    const x = tf.randomUniform([1, 4, 4, 1], 0, 1, "float32", t);
    const { logits, trace } = model.forward(x, { trace: true });
    const nb = networkBounds(model, trace!);
    const block = nb.examples[0].layers.find((l) => l.name === "blocks.0")!;
    const byName = new Map(block.children.map((r) => [r.name, r]));
    const n = 5;
    const d = c.dModel;
    const ln = (z: ArrayLike<number>, which: string) => layerNorm64(z, n, weights.get(`blocks.0.${which}.gamma`)!, weights.get(`blocks.0.${which}.beta`)!, c.lnEps);
    const mlpOut = (z: ArrayLike<number>) => mlp64(z, n, weights, "blocks.0.mlp", c.activation).out;
    let exact: number;
    let truth: number;
    let product: number;
    if (!post) {
      const u = Float64Array.from(trace!.blocks[0].ln2Input.dataSync());
      const f = (z: Float64Array) => {
        const m = mlpOut(ln(z, "ln2"));
        return z.map((v, k) => v + m[k]);
      };
      truth = sigmaMax(fdJacobian(f, u, 1e-6), n * d, n * d);
      exact = byName.get("blocks.0.mlpResidual")!.shared!;
      product = 1 + nb.examples[0].blocks[0].ln2 * nb.examples[0].blocks[0].mlp.local;
    } else {
      const u = Float64Array.from(trace!.blocks[0].ln1Input.dataSync());
      const f = (z: Float64Array) => {
        const y = ln(z, "ln1");
        const m = mlpOut(y);
        return ln(y.map((v, k) => v + m[k]), "ln2");
      };
      truth = sigmaMax(fdJacobian(f, u, 1e-6), n * d, n * d);
      exact = block.values["t3-exact"] / byName.get("blocks.0.attnResidual")!.values["t3-exact"];
      const b = nb.examples[0].blocks[0];
      product = b.ln1 * (1 + b.mlp.local) * b.ln2;
    }
    assert.ok(Math.abs(exact - truth) <= 1e-5 * (1 + truth), `case ${t} (${post ? "post" : "pre"}-LN): row-wise value ${exact} vs dense truth ${truth}`);
    assert.ok(exact <= product * (1 + 1e-12), `case ${t}: row-wise value ${exact} above the product of factors ${product}`);
    logits.dispose();
    disposeTrace(trace!);
    x.dispose();
    model.dispose();
  }
});

test("a fully padded example gives finite bounds and empty statistics; the relaxed MLP option composes", () => {
  const cfg = {
    kind: "text" as const,
    vocabSize: 10,
    maxLength: 8,
    dModel: 4,
    heads: 2,
    blocks: 1,
    mlpHidden: 6,
    classes: 2,
    pooling: "mean" as const,
  };
  const model = createModel(cfg);
  const ids = tf.tensor2d([1, 2, 3, 4, 5, 6], [2, 3], "int32");
  const mask = tf.tensor2d([1, 1, 0, 0, 0, 0], [2, 3]);
  const { logits, trace } = model.forward(ids, { trace: true, mask });
  assert.ok(trace);
  const nb = networkBounds(model, trace);
  const empty = nb.examples[1];
  for (const name of HEAD_VARIANTS) {
    assert.ok(Number.isFinite(empty.network[name]), name);
    assert.ok(Number.isFinite(empty.blocks[0].block[name]), name);
  }
  assert.equal(empty.finalNorm, 0); // mean over no real token: constant output
  assert.deepEqual(empty.blocks[0].heads[0].stats, {
    rows: 0,
    meanSigma: 0,
    maxSigma: 0,
    meanTop: 0,
    meanEntropy: 0,
  });
  const relaxed = networkBounds(model, trace, { mlp: "relaxed" });
  assert.equal(relaxed.mlpInBlock, "relaxed");
  for (const name of HEAD_VARIANTS)
    assert.ok(
      relaxed.examples[0].network[name] >= nb.examples[0].network[name] * (1 - 1e-12),
      name,
    );
  assert.throws(() => networkBounds(model, trace, { mlp: "bogus" as "local" }), /options.mlp/);
  logits.dispose();
  disposeTrace(trace);
  ids.dispose();
  mask.dispose();
  model.dispose();
});
