// Forward-mode Jacobians at a point (src/lipschitz/truth/linearize.ts) against the double-VJP
// products they replace in the true values' Lanczos runs (issue 35).
import { test } from "node:test";
import assert from "node:assert/strict";
import { tf, useBackend } from "../../src/backend.ts";
import {
  blockAttention,
  blockParams,
  createModel,
  transformerBlock,
  type AttentionParams,
  type ModelConfigInput,
  type TransformerClassifier,
} from "../../src/nn/index.ts";
import { allowedKeys } from "../../src/nn/mask.ts";
import {
  linearizeAttention,
  linearizeBlock,
  linearizeHead,
} from "../../src/lipschitz/truth/linearize.ts";
import {
  attentionLayerLipschitz,
  blockLipschitz,
  headLipschitz,
  headOutput,
  jvp,
  vjp,
  powerIterationLipschitz,
  type TensorFn,
} from "../../src/lipschitz/truth/index.ts";
import { randomizeWeights, uniform } from "../nn/helpers.ts";

await useBackend("wasm");

const base = { dModel: 12, heads: 3, blocks: 2, mlpHidden: 20, classes: 3 };
const CASES: [string, ModelConfigInput, boolean][] = [
  // name, config, padding (two padded positions)
  [
    "pre-LN ViT, gelu-tanh",
    { kind: "vit", imageSize: 8, channels: 1, patchSize: 4, ...base, norm: "pre" },
    false,
  ],
  [
    "post-LN BERT-like, gelu-erf, token types, padded",
    {
      kind: "text",
      vocabSize: 30,
      maxLength: 10,
      ...base,
      norm: "post",
      embeddingNorm: true,
      finalNorm: false,
      pooler: "tanh",
      activation: "gelu-erf",
      tokenTypes: 2,
      lnEps: 1e-12,
    },
    true,
  ],
  [
    "causal pre-LN GPT-2-like, no QKV bias, padded",
    {
      kind: "text",
      vocabSize: 30,
      maxLength: 10,
      ...base,
      norm: "pre",
      causal: true,
      pooling: "last",
      qkvBias: false,
    },
    true,
  ],
];

/** max |a - b| over max |b|. */
function relMax(a: tf.Tensor, b: tf.Tensor): number {
  const x = a.dataSync();
  const y = b.dataSync();
  let diff = 0;
  let top = 0;
  for (let i = 0; i < y.length; i++) {
    diff = Math.max(diff, Math.abs(x[i] - y[i]));
    top = Math.max(top, Math.abs(y[i]));
  }
  return diff / top;
}

function blockInput(model: TransformerClassifier, padded: boolean, seed: number) {
  const c = model.config;
  const n = c.kind === "vit" ? (c.imageSize / c.patchSize) ** 2 + 1 : 8;
  const mask = padded && c.kind === "text" ? tf.tensor2d([[1, 1, 1, 1, 1, 1, 0, 0]]) : null;
  const x = tf.tensor3d(uniform(n * c.dModel, seed, -2, 2), [1, n, c.dModel]);
  const allowed = allowedKeys(mask, c.kind === "text" && c.causal === true, n);
  return { x, mask, allowed, n };
}

for (const [name, config, padded] of CASES) {
  test(`${name}: the block's, attention layer's and each head's forward-mode Jacobian equals the double-VJP JVP, and its adjoint the backward pass`, () => {
    const model = createModel(config, 1) as TransformerClassifier;
    randomizeWeights(model, 7, 0.4);
    const before = tf.memory().numTensors;
    const { x, mask, allowed } = blockInput(model, padded, 3);
    const cfg = model.blockConfig;
    for (let b = 0; b < model.config.blocks; b++) {
      const p = blockParams(model.params, b);
      const t = tf.tensor(uniform(x.size, 10 + b, -1, 1), x.shape);
      const block: TensorFn = (z) => transformerBlock(z, p, cfg, { allowed }).out;
      const lin = linearizeBlock(x, p, cfg, allowed);
      const [ours, ref] = [lin.tangent(t), jvp(block, x, t)];
      assert.ok(relMax(ours, ref) < 1e-5, `block ${b}: ${relMax(ours, ref)}`);
      const u = tf.tensor(uniform(x.size, 20 + b, -1, 1), x.shape);
      const [back, refBack] = [lin.cotangent(u), vjp(block, x, u)];
      assert.ok(relMax(back, refBack) < 1e-5, `block ${b} adjoint: ${relMax(back, refBack)}`);
      tf.dispose([ours, ref, back, refBack]);
      lin.dispose();
      const attn: TensorFn = (z) => blockAttention(z, p.attn, cfg, allowed).out;
      const linA = linearizeAttention(x, p.attn as AttentionParams, cfg.heads, allowed);
      const [oursA, refA] = [linA.tangent(t), jvp(attn, x, t)];
      assert.ok(relMax(oursA, refA) < 1e-5, `attention ${b}: ${relMax(oursA, refA)}`);
      const [backA, refBackA] = [linA.cotangent(u), vjp(attn, x, u)];
      assert.ok(
        relMax(backA, refBackA) < 1e-5,
        `attention ${b} adjoint: ${relMax(backA, refBackA)}`,
      );
      tf.dispose([oursA, refA, backA, refBackA, u]);
      linA.dispose();
      t.dispose();
    }
    // Whole estimates: the forward-mode products give the generic products' values.
    const p0 = blockParams(model.params, 0);
    const opts = { maxIterations: 300, tolerance: 1e-6, seed: 2 };
    if (mask === null) {
      const generic = powerIterationLipschitz(
        (z) => transformerBlock(z, p0, cfg, { allowed }).out,
        x,
        opts,
      );
      const ours = blockLipschitz(model, 0, x, null, opts);
      assert.ok(
        Math.abs(ours.value - generic.value) <= 1e-5 * generic.value,
        `${ours.value} vs ${generic.value}`,
      );
      for (let h = 0; h < cfg.heads; h++) {
        const g = powerIterationLipschitz(
          (z) => headOutput(z, p0.attn, cfg.heads, h, allowed),
          x,
          opts,
        );
        const o = headLipschitz(model, 0, h, x, null, opts);
        assert.ok(
          Math.abs(o.value - g.value) <= 1e-5 * g.value,
          `head ${h}: ${o.value} vs ${g.value}`,
        );
      }
      const ga = powerIterationLipschitz(
        (z) => blockAttention(z, p0.attn, cfg, allowed).out,
        x,
        opts,
      );
      const oa = attentionLayerLipschitz(model, 0, x, null, opts);
      assert.ok(
        Math.abs(oa.value - ga.value) <= 1e-5 * ga.value,
        `attention: ${oa.value} vs ${ga.value}`,
      );
    } else {
      // Padded: compare with the estimates on the real rows computed by a plain map of them.
      const real = 6;
      const rest = tf.slice(x, [0, real, 0], [1, -1, -1]);
      const head = tf.slice(x, [0, 0, 0], [1, real, -1]);
      const onReal =
        (g: TensorFn): TensorFn =>
        (e) =>
          tf.slice(g(tf.concat([e, rest], 1)), [0, 0, 0], [1, real, -1]);
      const generic = powerIterationLipschitz(
        onReal((z) => transformerBlock(z, p0, cfg, { allowed }).out),
        head,
        opts,
      );
      const ours = blockLipschitz(model, 0, x, mask, opts);
      assert.ok(
        Math.abs(ours.value - generic.value) <= 1e-5 * generic.value,
        `${ours.value} vs ${generic.value}`,
      );
      for (let h = 0; h < cfg.heads; h++) {
        const g = powerIterationLipschitz(
          onReal((z) => headOutput(z, p0.attn, cfg.heads, h, allowed)),
          head,
          opts,
        );
        const o = headLipschitz(model, 0, h, x, mask, opts);
        assert.ok(
          Math.abs(o.value - g.value) <= 1e-5 * g.value,
          `head ${h}: ${o.value} vs ${g.value}`,
        );
      }
      tf.dispose([rest, head]);
    }
    tf.dispose([x, mask, allowed].filter((a): a is tf.Tensor => a !== null));
    assert.equal(tf.memory().numTensors, before, "tensors left behind");
    model.dispose();
  });
}

test("linearizeHead: the head map's forward-mode Jacobian equals the double-VJP JVP, and its adjoint the backward pass", () => {
  const model = createModel(CASES[0][1], 4) as TransformerClassifier;
  randomizeWeights(model, 9, 0.5);
  const { x } = blockInput(model, false, 5);
  const p = blockParams(model.params, 1).attn as AttentionParams;
  const heads = model.config.heads;
  const d = model.config.dModel;
  const dk = d / heads;
  for (let h = 0; h < heads; h++) {
    const cols = (w: tf.Tensor) => tf.slice(w, [0, h * dk], [d, dk]);
    const bias = (b: tf.Tensor | undefined) => (b === undefined ? 0 : tf.slice(b, [h * dk], [dk]));
    const flat = tf.reshape(x, [-1, d]);
    const proj = (w: tf.Tensor, b: tf.Tensor | undefined) =>
      tf.reshape(tf.add(tf.matMul(flat, cols(w)), bias(b)), [1, -1, dk]);
    const q = proj(p.wq, p.bq);
    const k = proj(p.wk, p.bk);
    const v = proj(p.wv, p.bv);
    const probs = tf.softmax(tf.matMul(tf.mul(q, 1 / Math.sqrt(dk)), k, false, true), -1);
    const lin = linearizeHead(
      { q, k, v, p: probs },
      { wq: cols(p.wq), wk: cols(p.wk), wv: cols(p.wv) },
    );
    const t = tf.tensor(uniform(x.size, 20 + h, -1, 1), x.shape);
    const ours = lin.tangent(t);
    const ref = jvp((z) => headOutput(z, p, heads, h, null), x, t);
    assert.ok(relMax(ours, ref) < 1e-5, `head ${h}: ${relMax(ours, ref)}`);
    const u = tf.tensor(uniform(ours.size, 40 + h, -1, 1), ours.shape);
    const back = lin.cotangent(u);
    const refBack = vjp((z) => headOutput(z, p, heads, h, null), x, u);
    assert.ok(relMax(back, refBack) < 1e-5, `head ${h} adjoint: ${relMax(back, refBack)}`);
    tf.dispose([ours, ref, t, flat, u, back, refBack]);
    lin.dispose();
  }
  x.dispose();
  model.dispose();
});

test("linearizeBlock refuses an L2-attention block (its true values keep the generic products)", () => {
  const model = createModel(
    { kind: "vit", imageSize: 8, channels: 1, patchSize: 4, ...base, norm: "pre", attention: "l2" },
    1,
  ) as TransformerClassifier;
  const x = tf.zeros([1, 5, base.dModel]);
  assert.throws(
    () => linearizeBlock(x, blockParams(model.params, 0), model.blockConfig, null),
    /dot-product attention only/,
  );
  x.dispose();
  model.dispose();
});
