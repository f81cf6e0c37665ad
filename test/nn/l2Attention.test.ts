// L2 self-attention (src/nn/l2Attention.ts, Kim et al. 2021): the tfjs layer against the
// float64 reference of test/helpers/reference64.ts (written from the definition), its input
// Jacobian against central differences, masks, the tied query/key weight, the presets, and the
// true values of src/lipschitz/truth/ on an L2 model.
import { test } from "node:test";
import assert from "node:assert/strict";
import { tf, useBackend } from "../../src/backend.ts";
import {
  allowedKeys,
  blockAttention,
  blockParams,
  createModel,
  l2MultiHeadAttention,
  multiHeadAttention,
  transformerBlock,
  type L2AttentionParams,
  type NamedArray,
} from "../../src/nn/index.ts";
import {
  modelPreset,
  parseModelConfig,
  ConfigError,
  type TextConfig,
} from "../../src/nn/config.ts";
import { l2Probabilities64 } from "../../src/lipschitz/rules/l2Head.ts";
import { denseJacobian, denseLipschitz } from "../../src/lipschitz/truth/denseJacobian.ts";
import {
  blockLipschitz,
  headLipschitz,
  headOutput,
} from "../../src/lipschitz/truth/powerIteration.ts";
import { l2Attention64Ref, textForward64 } from "../helpers/reference64.ts";
import { randomizeWeights, relError, uniform } from "./helpers.ts";

await useBackend("wasm");

const d = 8;
const heads = 2;
const n = 5;

function weights(seed: number, bias: boolean): Map<string, NamedArray> {
  const m = new Map<string, NamedArray>();
  let s = seed;
  for (const name of ["wq", "wv", "wo"])
    m.set(`a.${name}`, { data: uniform(d * d, s++, -0.8, 0.8), shape: [d, d] });
  for (const name of bias ? ["bv", "bo"] : ["bo"])
    m.set(`a.${name}`, { data: uniform(d, s++, -0.5, 0.5), shape: [d] });
  return m;
}

function params(m: Map<string, NamedArray>): L2AttentionParams {
  const t = (k: string) => {
    const w = m.get(`a.${k}`);
    return w === undefined ? undefined : tf.tensor(w.data, w.shape);
  };
  return { wq: t("wq")!, wv: t("wv")!, wo: t("wo")!, bo: t("bo")!, bv: t("bv") };
}

/** Per example, the [n * n] allowed matrix of a padding row (1 = real token). */
function allowedOf(real: number[]): number[] {
  return Array.from({ length: n * n }, (_, k) => real[k % n]);
}

test("forward equals the float64 reference (with and without biases, with padding), float32 tolerance", () => {
  for (const bias of [true, false]) {
    const m = weights(bias ? 1 : 11, bias);
    const p = params(m);
    const xs = uniform(2 * n * d, 3, -1.5, 1.5);
    const real = [
      [1, 1, 1, 1, 1],
      [1, 1, 1, 0, 0],
    ];
    const x = tf.tensor3d(xs, [2, n, d]);
    const pad = tf.tensor2d(real.flat(), [2, n]);
    const allowed = allowedKeys(pad, false, n);
    const r = l2MultiHeadAttention(x, p, heads, allowed);
    const out = r.out.dataSync();
    const probs = r.p.dataSync();
    assert.equal(r.q, r.k, "keys are the queries (one tensor)");
    for (let e = 0; e < 2; e++) {
      const xe = xs.subarray(e * n * d, (e + 1) * n * d);
      const ref = l2Attention64Ref(xe, n, heads, m, "a", allowedOf(real[e]));
      assert.ok(
        relError(out.subarray(e * n * d, (e + 1) * n * d), ref.out) < 2e-5,
        `out, example ${e}, bias ${bias}`,
      );
      assert.ok(
        relError(probs.subarray(e * heads * n * n, (e + 1) * heads * n * n), ref.p) < 2e-5,
        `p, example ${e}`,
      );
      // The probabilities the L2 rule recomputes in float64 from each head's queries (src)
      // agree with the reference's to float64 precision.
      for (let h = 0; h < heads; h++) {
        const size = n * n;
        const src = l2Probabilities64(
          ref.q.subarray(h * n * (d / heads), (h + 1) * n * (d / heads)),
          n,
          d / heads,
          allowedOf(real[e]),
        );
        assert.ok(
          relError(src, ref.p.subarray(h * size, (h + 1) * size)) < 1e-12,
          `l2Probabilities64, head ${h}`,
        );
      }
    }
    // The scores are not dot-product scores: the dot-product layer with W_K = W_Q differs.
    const dot = multiHeadAttention(x, { ...p, wk: p.wq }, heads, allowed);
    assert.ok(
      relError(dot.out.dataSync(), Array.from(out)) > 1e-2,
      "L2 and dot-product outputs differ",
    );
    tf.dispose([x, pad, allowed!, r.out, r.q, r.v, r.p, dot.out, dot.q, dot.k, dot.v, dot.p]);
    for (const t of Object.values(p)) (t as tf.Tensor | undefined)?.dispose();
  }
});

test("input Jacobian (tfjs autodiff) equals central differences of the float64 reference", () => {
  const m = weights(21, true);
  const p = params(m);
  const xs = uniform(n * d, 22, -1, 1);
  const x = tf.tensor3d(xs, [1, n, d]);
  const J = denseJacobian((z) => l2MultiHeadAttention(z, p, heads).out, x);
  const h = 1e-6;
  let diff = 0;
  let scale = 0;
  for (let c = 0; c < n * d; c++) {
    const plus = Float64Array.from(xs);
    const minus = Float64Array.from(xs);
    plus[c] += h;
    minus[c] -= h;
    const a = l2Attention64Ref(plus, n, heads, m, "a").out;
    const b = l2Attention64Ref(minus, n, heads, m, "a").out;
    for (let r = 0; r < n * d; r++) {
      const fd = (a[r] - b[r]) / (2 * h);
      diff = Math.max(diff, Math.abs(J.data[r * n * d + c] - fd));
      scale = Math.max(scale, Math.abs(fd));
    }
  }
  assert.ok(scale > 0.1, "a Jacobian that is not zero");
  assert.ok(diff / scale < 1e-4, `max |J - J_fd| / max |J_fd| = ${diff / scale}`);
  x.dispose();
  for (const t of Object.values(p)) (t as tf.Tensor | undefined)?.dispose();
});

test("the query/key weight is one tensor and its gradient (through queries, keys and values) is the reference's", () => {
  const m = weights(31, true);
  const p = params(m);
  const xs = uniform(n * d, 32, -1, 1);
  const cot = uniform(n * d, 33, -1, 1);
  const x = tf.tensor3d(xs, [1, n, d]);
  const c = tf.tensor3d(cot, [1, n, d]);
  const loss = (wq: tf.Tensor) =>
    tf.sum(tf.mul(l2MultiHeadAttention(x, { ...p, wq }, heads).out, c));
  const [gw] = tf.grads(loss)([p.wq]);
  const g = gw.dataSync();
  const lossRef = (w: NamedArray) => {
    const mm = new Map(m);
    mm.set("a.wq", w);
    const out = l2Attention64Ref(xs, n, heads, mm, "a").out;
    return out.reduce((s, v, i) => s + v * cot[i], 0);
  };
  const wq = m.get("a.wq")!;
  const h = 1e-6;
  let diff = 0;
  let scale = 0;
  for (let k = 0; k < d * d; k++) {
    const plus = Float64Array.from(wq.data);
    const minus = Float64Array.from(wq.data);
    plus[k] += h;
    minus[k] -= h;
    // NamedArray data is float32 in the store; the reference reads any array.
    const fd =
      (lossRef({ data: plus as unknown as Float32Array, shape: wq.shape }) -
        lossRef({ data: minus as unknown as Float32Array, shape: wq.shape })) /
      (2 * h);
    diff = Math.max(diff, Math.abs(g[k] - fd));
    scale = Math.max(scale, Math.abs(fd));
  }
  assert.ok(scale > 0.1 && diff / scale < 1e-4, `dW_Q vs central differences: ${diff / scale}`);
  // In a model: one wq per block, no wk, bk nor bq (qkvBias adds bv only), and the block's
  // attention reads that variable; a query bias is refused.
  for (const qkvBias of [true, false]) {
    const model = createModel({ ...modelPreset("vit-micro-l2"), qkvBias });
    const names = [...model.getWeights().keys()].filter((k) => k.startsWith("blocks.0.attn."));
    assert.deepEqual(
      names.sort(),
      (qkvBias ? ["bo", "bv", "wo", "wq", "wv"] : ["bo", "wo", "wq", "wv"])
        .map((r) => `blocks.0.attn.${r}`)
        .sort(),
    );
    const attn = blockParams(model.params, 0).attn;
    assert.ok(!("wk" in attn) && attn.wq === model.params.get("blocks.0.attn.wq"));
    assert.throws(
      () => blockAttention(x, { ...attn, bq: attn.wv }, model.blockConfig, null),
      /L2-attention block takes no query bias bq/,
    );
    model.dispose();
  }
  tf.dispose([x, c, gw]);
  for (const t of Object.values(p)) (t as tf.Tensor | undefined)?.dispose();
});

test("text model with L2 attention: equals the float64 reference; padded tokens change nothing", () => {
  const cfg = {
    kind: "text",
    vocabSize: 40,
    maxLength: 8,
    dModel: d,
    heads,
    blocks: 1,
    mlpHidden: 16,
    classes: 2,
    attention: "l2",
  } as const;
  const model = createModel(cfg, 3);
  randomizeWeights(model, 4, 0.3);
  const ids = [5, 9, 2, 7, 1, 0, 0, 0];
  const mask = [1, 1, 1, 1, 1, 0, 0, 0];
  const logitsOf = (tokens: number[], real: number[] | null) =>
    tf.tidy(() => {
      const opts = real ? { mask: tf.tensor2d(real, [1, real.length], "int32") } : {};
      return Array.from(
        model.forward(tf.tensor2d(tokens, [1, tokens.length], "int32"), opts).logits.dataSync(),
      );
    });
  const a = logitsOf(ids, mask);
  const b = logitsOf([5, 9, 2, 7, 1, 33, 12, 39], mask);
  const alone = logitsOf(ids.slice(0, 5), null);
  assert.deepEqual(a, b, "other padded ids, same logits");
  assert.ok(relError(a, alone) < 1e-5, "padding vs no padding");
  const ref = textForward64(model.config as TextConfig, model.getWeights(), ids, mask).logits;
  assert.ok(relError(a, ref) < 2e-5, `logits vs reference: ${relError(a, ref)}`);
  // Without the mask the padded tokens are attended to and the logits move.
  assert.ok(relError(logitsOf(ids, null), a) > 1e-4);
  model.dispose();
});

test("presets: vit-tiny-l2 / text-tiny-l2 / vit-micro-l2 are their dot-product presets with attention l2", () => {
  for (const [l2, dot] of [
    ["vit-tiny-l2", "vit-tiny"],
    ["text-tiny-l2", "text-tiny"],
    ["vit-micro-l2", "vit-micro"],
  ]) {
    const a = modelPreset(l2);
    assert.equal(a.attention, "l2");
    assert.deepEqual({ ...a, attention: undefined }, { ...modelPreset(dot), attention: undefined });
    assert.equal(
      modelPreset(dot).attention,
      undefined,
      "dot-product presets do not name the field",
    );
  }
  assert.throws(
    () => parseModelConfig({ ...modelPreset("vit-micro"), attention: "cosine" }),
    (e: Error) => e instanceof ConfigError && /attention/.test(e.message),
  );
});

test("true values of an L2 model: block and head Lanczos estimates equal dense Jacobians (with padding)", () => {
  const cfg = {
    kind: "text",
    vocabSize: 30,
    maxLength: 6,
    dModel: d,
    heads,
    blocks: 1,
    mlpHidden: 16,
    classes: 2,
    attention: "l2",
    causal: true,
  } as const;
  const model = createModel(cfg, 5);
  randomizeWeights(model, 6, 0.3);
  const real = [1, 1, 1, 1, 0, 0];
  const seq = tf.tidy(() => model.embed(tf.tensor2d([3, 1, 4, 1, 5, 9], [1, 6], "int32")));
  const mask = tf.tensor2d(real, [1, 6]);
  const allowed = allowedKeys(mask, true, 6);
  // The real rows only, as the truth wrappers restrict them.
  const r4 = tf.slice(seq, [0, 0, 0], [1, 4, d]);
  const pad = tf.slice(seq, [0, 4, 0], [1, 2, d]);
  const restrict = (f: (x: tf.Tensor) => tf.Tensor) => (z: tf.Tensor) =>
    tf.slice(f(tf.concat([z, pad], 1)), [0, 0, 0], [1, 4, -1]);
  const p = blockParams(model.params, 0);
  const PI = { tolerance: 1e-7 };
  const block = blockLipschitz(model, 0, seq, mask, PI);
  const dense = denseLipschitz(
    restrict((x) => transformerBlock(x, p, model.blockConfig, { allowed }).out),
    r4,
  );
  assert.ok(
    block.converged && Math.abs(block.value - dense) <= 1e-4 * dense,
    `block ${block.value} vs ${dense}`,
  );
  for (let h = 0; h < heads; h++) {
    const est = headLipschitz(model, 0, h, seq, mask, PI);
    const truth = denseLipschitz(
      restrict((x) => headOutput(x, p.attn, heads, h, allowed)),
      r4,
    );
    assert.ok(Math.abs(est.value - truth) <= 1e-4 * truth, `head ${h}: ${est.value} vs ${truth}`);
    // headOutput of L2 parameters is the layer's P_h V_h.
    const ours = headOutput(seq, p.attn, heads, h, allowed);
    const r = l2MultiHeadAttention(seq, p.attn as L2AttentionParams, heads, allowed);
    const pv = tf.matMul(
      tf.reshape(tf.slice(r.p, [0, h, 0, 0], [1, 1, 6, 6]), [1, 6, 6]),
      tf.reshape(tf.slice(r.v, [0, h, 0, 0], [1, 1, 6, d / heads]), [1, 6, d / heads]),
    );
    assert.ok(relError(ours.dataSync(), pv.dataSync()) < 1e-5, `headOutput, head ${h}`);
    tf.dispose([ours, r.out, r.q, r.v, r.p, pv]);
  }
  tf.dispose([seq, mask, allowed!, r4, pad]);
  model.dispose();
});
