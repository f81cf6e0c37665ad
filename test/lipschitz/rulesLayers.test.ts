// LayerNorm, MLP, multi-head attention layer, residual and block rules (docs/math.md section 3)
// against dense finite-difference Jacobians of the float64 reference (test/helpers/reference64.ts),
// and the layer table.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  HEAD_VARIANTS,
  attentionHeadBounds,
  inputNorms,
  type VariantValues,
} from "../../src/lipschitz/rules/attentionHead.ts";
import { attentionLayerBound } from "../../src/lipschitz/rules/attentionLayer.ts";
import { blockBound, residualBound } from "../../src/lipschitz/rules/block.ts";
import { layerNormBound } from "../../src/lipschitz/rules/layerNorm.ts";
import { mlpBound } from "../../src/lipschitz/rules/mlp.ts";
import { finalNormBound, poolBound } from "../../src/lipschitz/rules/output.ts";
import { poolerBound } from "../../src/lipschitz/rules/pooler.ts";
import { layerKind, layerKinds } from "../../src/lipschitz/layers/registry.ts";
import { modelWeightNorms, type Weights } from "../../src/lipschitz/rules/weightNorms.ts";
import { attention64, block64, layerNorm64, mlp64 } from "../helpers/reference64.ts";
import type { ModelConfig } from "../../src/nn/config.ts";
import {
  fdJacobian,
  mulberry32,
  normals,
  pick,
  randomAllowed,
  randomWeights,
  sigmaMax,
  type Rand,
} from "./rulesHelpers.ts";

const TOL = 1e-4;

function w(weights: Weights, name: string) {
  const v = weights.get(name);
  if (!v) throw new Error(name);
  return v;
}

test("LayerNorm rule >= true local constant on 250 random inputs (near-constant rows included)", () => {
  const rand = mulberry32(61);
  for (let t = 0; t < 250; t++) {
    const n = 1 + Math.floor(rand() * 6);
    const d = 2 + Math.floor(rand() * 10);
    const eps = pick(rand, [1e-5, 1e-3, 0.1]);
    const x = normals(rand, n * d, pick(rand, [0.01, 1, 10]));
    if (rand() < 0.3) for (let a = 0; a < d; a++) x[a] = 3 + 1e-3 * x[a]; // row 0 nearly constant
    const gamma = {
      data: Float32Array.from(normals(rand, d, pick(rand, [0.3, 1, 3]))),
      shape: [d],
    };
    const beta = { data: Float32Array.from(normals(rand, d)), shape: [d] };
    const truth = sigmaMax(
      fdJacobian((z) => layerNorm64(z, n, gamma, beta, eps), x, 1e-7),
      n * d,
      n * d,
    );
    const b = layerNormBound(x, n, d, gamma.data, eps);
    assert.ok(b.value >= truth * (1 - TOL), `case ${t}: ${b.value} < ${truth}`);
    assert.ok(b.rows.length === n);
  }
});

test("MLP rule (tanh and exact GELU): local value equals the true local constant, relaxed and global are above it (250 cases)", () => {
  const rand = mulberry32(62);
  for (let t = 0; t < 250; t++) {
    const activation = t % 2 === 0 ? "gelu-tanh" : "gelu-erf";
    const n = 1 + Math.floor(rand() * 5);
    const d = 2 + Math.floor(rand() * 8);
    const hidden = 2 + Math.floor(rand() * 14);
    const scale = pick(rand, [0.3, 1, 3]);
    const weights = randomWeights(
      rand,
      { dModel: d, heads: 1, mlpHidden: hidden, blocks: 1 },
      scale,
      false,
    );
    const x = normals(rand, n * d, pick(rand, [0.3, 1, 3]));
    const truth = sigmaMax(
      fdJacobian((z) => mlp64(z, n, weights, "blocks.0.mlp", activation).out, x, 1e-6),
      n * d,
      n * d,
    );
    const { h } = mlp64(x, n, weights, "blocks.0.mlp", activation);
    const norms = modelWeightNorms(weights, { dModel: d, heads: 1, blocks: 1 }).blocks[0];
    const b = mlpBound(
      h,
      n,
      d,
      hidden,
      norms.w1,
      norms.w2,
      { w1: norms.w1Norm, w2: norms.w2Norm },
      { activation },
    );
    assert.ok(b.local >= truth * (1 - TOL), `case ${t}: local ${b.local} < ${truth}`);
    assert.ok(
      Math.abs(b.local - truth) <= 1e-6 * Math.max(truth, 1e-3),
      `case ${t}: local ${b.local} vs ${truth}`,
    );
    assert.ok(
      b.relaxed >= b.local * (1 - 1e-12) && b.global >= b.relaxed * (1 - 1e-12),
      `case ${t}`,
    );
    const cheap = mlpBound(
      h,
      n,
      d,
      hidden,
      norms.w1,
      norms.w2,
      { w1: norms.w1Norm, w2: norms.w2Norm },
      { local: false, activation },
    );
    assert.ok(Number.isNaN(cheap.local) && cheap.relaxed === b.relaxed);
  }
});

/** Each head's bounds for one sequence of the reference attention (layout [H, n, dk]). */
function layerHeadBounds(
  x: Float64Array,
  n: number,
  heads: number,
  weights: Weights,
  block: number,
  attn: ReturnType<typeof attention64>,
  allowed?: Uint8Array,
): VariantValues[] {
  const d = x.length / n;
  const dk = d / heads;
  const norms = modelWeightNorms(weights, { dModel: d, heads, blocks: block + 1 }).blocks[block];
  const xNorms = inputNorms(x, n, d);
  return norms.heads.map(
    (hn, h) =>
      attentionHeadBounds(
        {
          n,
          xNorms,
          q: attn.q.subarray(h * n * dk, (h + 1) * n * dk),
          k: attn.k.subarray(h * n * dk, (h + 1) * n * dk),
          v: attn.v.subarray(h * n * dk, (h + 1) * n * dk),
          p: attn.p.subarray(h * n * n, (h + 1) * n * n),
          allowed,
        },
        hn,
      ).values,
  );
}

function randomShape(rand: Rand) {
  const heads = pick(rand, [1, 2, 3]);
  const dk = 1 + Math.floor(rand() * 4);
  return { dModel: heads * dk, heads, mlpHidden: 2 + Math.floor(rand() * 10) };
}

test("multi-head attention layer rule >= true local constant on 220 random layers (masks, biases)", () => {
  const rand = mulberry32(63);
  for (let t = 0; t < 220; t++) {
    const shape = randomShape(rand);
    const n = 2 + Math.floor(rand() * 7);
    const d = shape.dModel;
    const weights = randomWeights(
      rand,
      { ...shape, blocks: 1 },
      pick(rand, [0.3, 1, 3]),
      rand() < 0.5,
    );
    const x = normals(rand, n * d, pick(rand, [0.3, 1, 3]));
    const allowed = randomAllowed(rand, n);
    const f = (z: Float64Array) =>
      attention64(z, n, shape.heads, weights, "blocks.0.attn", allowed).out;
    const truth = sigmaMax(fdJacobian(f, x, 1e-6), n * d, n * d);
    const attn = attention64(x, n, shape.heads, weights, "blocks.0.attn", allowed);
    const hb = layerHeadBounds(x, n, shape.heads, weights, 0, attn, allowed);
    const norms = modelWeightNorms(weights, { dModel: d, heads: shape.heads, blocks: 1 });
    const layer = attentionLayerBound(hb, norms.blocks[0].wo);
    for (const name of HEAD_VARIANTS)
      assert.ok(layer[name] >= truth * (1 - TOL), `case ${t}: ${name} ${layer[name]} < ${truth}`);
  }
});

function cfgFor(
  shape: { dModel: number; heads: number; mlpHidden: number },
  norm: "pre" | "post",
  lnEps: number,
  activation: "gelu-tanh" | "gelu-erf" = "gelu-tanh",
): ModelConfig {
  return {
    kind: "text",
    vocabSize: 10,
    maxLength: 64,
    ...shape,
    blocks: 1,
    classes: 3,
    qkvBias: true,
    norm,
    lnEps,
    activation,
    dropout: 0,
    pooling: "cls",
    causal: false,
  };
}

test("block rule (pre-LN and post-LN, tanh and exact GELU) >= true local constant on 220 random blocks", () => {
  const rand = mulberry32(64);
  const add = (a: Float64Array, b: Float64Array) => a.map((v, i) => v + b[i]);
  for (let t = 0; t < 220; t++) {
    const shape = randomShape(rand);
    const norm = t % 2 === 0 ? "pre" : "post";
    const activation = t % 4 < 2 ? "gelu-tanh" : "gelu-erf";
    const cfg = cfgFor(shape, norm, pick(rand, [1e-5, 1e-2]), activation);
    const n = 2 + Math.floor(rand() * 6);
    const d = shape.dModel;
    const weights = randomWeights(
      rand,
      { ...shape, blocks: 1 },
      pick(rand, [0.3, 1, 3]),
      rand() < 0.5,
    );
    const x = normals(rand, n * d, pick(rand, [0.3, 1, 3]));
    const allowed = randomAllowed(rand, n);
    const truth = sigmaMax(
      fdJacobian((z) => block64(z, n, cfg, weights, 0, allowed).out, x, 1e-6),
      n * d,
      n * d,
    );
    const g = (name: string) => w(weights, `blocks.0.${name}`);
    const ln = (z: Float64Array, which: string) =>
      layerNorm64(z, n, g(`${which}.gamma`), g(`${which}.beta`), cfg.lnEps);
    const r = block64(x, n, cfg, weights, 0, allowed);
    let attnInput: Float64Array, ln1Input: Float64Array, ln2Input: Float64Array;
    if (norm === "pre") {
      attnInput = ln(x, "ln1");
      ln1Input = x;
      ln2Input = add(x, r.attn.out);
    } else {
      attnInput = x;
      ln1Input = add(x, r.attn.out);
      const y = ln(ln1Input, "ln1");
      ln2Input = add(y, mlp64(y, n, weights, "blocks.0.mlp", activation).out);
    }
    const norms = modelWeightNorms(weights, { dModel: d, heads: shape.heads, blocks: 1 }).blocks[0];
    const attention = attentionLayerBound(
      layerHeadBounds(attnInput, n, shape.heads, weights, 0, r.attn, allowed),
      norms.wo,
    );
    const mlp = mlpBound(
      r.h,
      n,
      d,
      shape.mlpHidden,
      norms.w1,
      norms.w2,
      { w1: norms.w1Norm, w2: norms.w2Norm },
      { activation },
    );
    const parts = {
      norm,
      attention,
      ln1: layerNormBound(ln1Input, n, d, norms.ln1Gamma, cfg.lnEps).value,
      ln2: layerNormBound(ln2Input, n, d, norms.ln2Gamma, cfg.lnEps).value,
    } as const;
    const local = blockBound({ ...parts, mlp: mlp.local });
    const relaxed = blockBound({ ...parts, mlp: mlp.relaxed });
    for (const name of HEAD_VARIANTS) {
      assert.ok(
        local[name] >= truth * (1 - TOL),
        `case ${t} (${norm}): ${name} ${local[name]} < ${truth}`,
      );
      assert.ok(relaxed[name] >= local[name] * (1 - 1e-12), `case ${t}: relaxed below local`);
    }
  }
});

test("residual rule is 1 + L and rejects negative or NaN bounds", () => {
  assert.equal(residualBound(0), 1);
  assert.equal(residualBound(2.5), 3.5);
  assert.throws(() => residualBound(-1), RangeError);
  assert.throws(() => residualBound(NaN), RangeError);
  const zero = Object.fromEntries(HEAD_VARIANTS.map((v) => [v, 0])) as VariantValues;
  assert.throws(
    () => blockBound({ norm: "pre", attention: zero, ln1: 1, ln2: 1, mlp: NaN }),
    /mlp/,
  );
  assert.throws(() => attentionLayerBound([], 1), /no heads/);
});

test("layerKind: every built-in kind has a record with a rule and a forward; an unknown kind throws naming it and listing the known kinds", () => {
  for (const kind of [
    "attention",
    "layerNorm",
    "mlp",
    "residual",
    "sequence",
    "patchEmbedding",
    "tokenEmbedding",
    "finalNorm",
    "pool",
    "pooler",
    "linear",
  ]) {
    assert.equal(typeof layerKind(kind).rule, "function", kind);
    assert.equal(typeof layerKind(kind).forward, "function", kind);
    assert.equal(layerKind(kind).kind, kind);
  }
  assert.throws(
    () => layerKind("unknown"),
    (e: Error) =>
      e.message.includes('"unknown"') && layerKinds().every((k) => e.message.includes(k)),
  );
  assert.throws(() => layerKind("toString"), /known kinds/);
});

test("pooler rule (tanh(x W + b)): the local value equals the true Jacobian norm and ||W|| is above it (200 cases)", () => {
  const rand = mulberry32(83);
  for (let t = 0; t < 200; t++) {
    const d = 1 + Math.floor(rand() * 8);
    const out = 1 + Math.floor(rand() * 8);
    const scale = pick(rand, [0.1, 1, 4]);
    const x = normals(rand, d, pick(rand, [0.1, 1, 3]));
    const W = { data: Float32Array.from(normals(rand, d * out, scale / Math.sqrt(d))), shape: [d, out] };
    const b = { data: Float32Array.from(normals(rand, out, 0.5)), shape: [out] };
    const kind = layerKind("pooler");
    const truth = sigmaMax(fdJacobian((z) => kind.reference64!(z, [d], { w: W, b }, {}), x, 1e-7), out, d);
    const r = poolerBound(x, W.data, b.data);
    assert.ok(Math.abs(r.local - truth) <= 1e-5 * (1 + truth), `case ${t}: local ${r.local} vs true ${truth}`);
    assert.ok(r.relaxed >= r.local * (1 - 1e-12), `case ${t}: relaxed ${r.relaxed} < local ${r.local}`);
  }
  assert.throws(() => poolerBound([1, 2], [1, 2, 3], [0]), /pooler: W must be \[2, 1\]/);
});

test("pooling rules: cls and last select one row (1), mean over m real rows is 1/sqrt(m); with the final LayerNorm, >= the true Jacobian norm (200 cases)", () => {
  const rand = mulberry32(84);
  for (let t = 0; t < 200; t++) {
    const n = 1 + Math.floor(rand() * 6);
    const d = 2 + Math.floor(rand() * 6);
    const pooling = pick(rand, ["cls", "mean", "last"] as const);
    const real = Array.from({ length: n }, (_, i) => (i === 0 || rand() < 0.7 ? 1 : 0));
    const rows = real.flatMap((v, i) => (v ? [i] : []));
    const picked = pooling === "cls" ? [0] : pooling === "last" ? [rows[rows.length - 1]] : rows;
    const pool64 = (z: ArrayLike<number>) => {
      const y = new Float64Array(d);
      for (const i of picked) for (let k = 0; k < d; k++) y[k] += z[i * d + k] / picked.length;
      return y;
    };
    const x = normals(rand, n * d, pick(rand, [0.01, 1, 10]));
    const poolTruth = sigmaMax(fdJacobian(pool64, x, 1e-6), d, n * d);
    const pb = poolBound(n, pooling, real);
    assert.ok(Math.abs(pb - poolTruth) <= 1e-6, `case ${t} (${pooling}): pool ${pb} vs true ${poolTruth}`);
    const gamma = { data: Float32Array.from(normals(rand, d, 1)), shape: [d] };
    const beta = { data: Float32Array.from(normals(rand, d)), shape: [d] };
    const eps = pick(rand, [1e-5, 1e-3]);
    const truth = sigmaMax(fdJacobian((z) => pool64(layerNorm64(z, n, gamma, beta, eps)), x, 1e-7), d, n * d);
    const fb = finalNormBound(x, n, d, gamma.data, eps, pooling, real);
    assert.ok(fb >= truth * (1 - TOL), `case ${t} (${pooling}): final norm ${fb} < true ${truth}`);
  }
  assert.equal(poolBound(3, "last", [0, 0, 0]), 0);
  assert.equal(finalNormBound([1, 2, 3, 4], 2, 2, [1, 1], 1e-5, "last", [0, 0]), 0);
  assert.throws(() => poolBound(2, "max" as "cls"), /unknown pooling "max"/);
});
