import { test } from "node:test";
import assert from "node:assert/strict";
import { tf, useBackend } from "../../src/backend.ts";
import {
  blockParams,
  createModel,
  disposeTrace,
  multiHeadAttention,
  transformerBlock,
  type ModelConfigInput,
} from "../../src/nn/index.ts";
import {
  attentionLayerLipschitz,
  blockLipschitz,
  denseLipschitz,
  headLipschitz,
  headOutput,
  inputJacobian,
  networkLipschitz,
  spectralNorm,
  TRUTH_METHOD,
  type PowerIterationResult,
  type TensorFn,
} from "../../src/lipschitz/truth/index.ts";
import { randomInts, randomizeWeights, uniform } from "../nn/helpers.ts";

await useBackend("wasm");

function noLeak<T>(fn: () => T): T {
  const before = tf.memory().numTensors;
  const out = fn();
  assert.equal(tf.memory().numTensors, before, "numTensors changed");
  return out;
}

function close(a: number, b: number, rel: number, what: string): void {
  assert.ok(Math.abs(a - b) <= rel * Math.abs(b), `${what}: ${a} vs ${b}`);
}

const PI = { maxIterations: 400, tolerance: 1e-6, seed: 1 };

/** Every estimate says how it was made, and converged means what it says. */
function madeBy(r: PowerIterationResult, what: string): void {
  assert.equal(r.method, TRUTH_METHOD, what);
  assert.equal(r.tolerance, PI.tolerance, what);
  assert.ok(r.converged, `${what}: not converged (residual ${r.residual})`);
  assert.ok(r.residual <= r.tolerance, `${what}: residual ${r.residual}`);
  assert.ok(r.iterations >= 2 && r.iterations <= PI.maxIterations, `${what}: ${r.iterations}`);
}

const tinyVit: ModelConfigInput = {
  kind: "vit",
  imageSize: 8,
  channels: 1,
  patchSize: 4,
  dModel: 8,
  heads: 2,
  blocks: 1,
  mlpHidden: 16,
  classes: 10,
};

const tinyText: ModelConfigInput = {
  kind: "text",
  vocabSize: 20,
  maxLength: 8,
  dModel: 8,
  heads: 2,
  blocks: 2,
  mlpHidden: 16,
  classes: 2,
  pooling: "mean",
};

const vit = createModel(tinyVit, 3);
randomizeWeights(vit, 11, 0.4);
const images = tf.tensor4d(uniform(3 * 64, 5), [3, 8, 8, 1]);

test("tiny ViT: block, attention layer and head power iteration agree with the dense truth", () => {
  const first = tf.slice(images, [0], [1]);
  const { logits, trace } = vit.forward(first, { trace: true });
  tf.dispose([logits, first]);
  assert.ok(trace);
  const p = blockParams(vit.params, 0);
  const input = trace.blocks[0].input;
  const attnInput = trace.blocks[0].attnInput;
  const block = noLeak(() => blockLipschitz(vit, 0, input, null, PI));
  const blockTruth = denseLipschitz((x) => transformerBlock(x, p, vit.blockConfig).out, input);
  close(block.value, blockTruth, 1e-5, "block");
  madeBy(block, "block");
  const layer = noLeak(() => attentionLayerLipschitz(vit, 0, attnInput, null, PI));
  const layerTruth = denseLipschitz((x) => multiHeadAttention(x, p.attn, 2).out, attnInput);
  close(layer.value, layerTruth, 1e-5, "attention layer");
  madeBy(layer, "attention layer");
  for (let h = 0; h < 2; h++) {
    const head = noLeak(() => headLipschitz(vit, 0, h, attnInput, null, PI));
    const headTruth = denseLipschitz((x) => headOutput(x, p.attn, 2, h), attnInput);
    close(head.value, headTruth, 1e-5, `head ${h}`);
    assert.ok(head.value <= headTruth * (1 + 1e-5));
    madeBy(head, `head ${h}`);
  }
  assert.throws(() => blockLipschitz(vit, 1, input), /block index 1/);
  assert.throws(() => headLipschitz(vit, 0, 2, attnInput), /head 2/);
  disposeTrace(trace);
});

test("headOutput equals P_h V_h of multiHeadAttention (with and without a mask)", () => {
  const x = tf.tensor3d(uniform(2 * 5 * 8, 8, -1, 1), [2, 5, 8]);
  const allowed = tf.tensor4d([1, 1, 1, 0, 0, 1, 1, 1, 1, 1], [2, 1, 1, 5]);
  const p = blockParams(vit.params, 0).attn;
  for (const mask of [null, allowed]) {
    const a = multiHeadAttention(x, p, 2, mask);
    for (let h = 0; h < 2; h++) {
      const ours = headOutput(x, p, 2, h, mask);
      const ref = tf.tidy(() =>
        tf.matMul(
          tf.reshape(tf.slice(a.p, [0, h], [2, 1]), [2, 5, 5]),
          tf.reshape(tf.slice(a.v, [0, h], [2, 1]), [2, 5, 4]),
        ),
      );
      const diff = tf.tidy(() => tf.max(tf.abs(tf.sub(ours, ref))).dataSync()[0]);
      assert.ok(diff < 1e-6, `head ${h}: ${diff}`);
      tf.dispose([ours, ref]);
    }
    tf.dispose([a.out, a.q, a.k, a.v, a.p]);
  }
  tf.dispose([x, allowed]);
});

test("tiny ViT: C-copies input Jacobian equals C separate gradients; networkLipschitz = dense", () => {
  const one = tf.slice(images, [1], [1]);
  const logitsFn = (z: tf.Tensor) => vit.forward(z).logits;
  const j = noLeak(() => inputJacobian(logitsFn, one));
  assert.equal(j.rows, 10);
  assert.equal(j.cols, 64);
  for (let c = 0; c < 10; c++) {
    const g = tf.tidy(() =>
      tf
        .grad((z) => tf.sum(tf.slice(logitsFn(z), [0, c], [1, 1])))(one)
        .dataSync(),
    );
    for (let k = 0; k < 64; k++)
      assert.ok(Math.abs(g[k] - j.data[c * 64 + k]) < 1e-5, `class ${c} pixel ${k}`);
  }
  const values = noLeak(() => networkLipschitz(vit, images, { examplesPerPass: 2 }));
  assert.equal(values.length, 3);
  for (let e = 0; e < 3; e++) {
    const x = tf.slice(images, [e], [1]);
    const truth = denseLipschitz(logitsFn, x, { mode: "jvp" });
    close(values[e], truth, 1e-4, `example ${e}`);
    x.dispose();
  }
  assert.ok(Math.abs(spectralNorm(j.data, 10, 64) - values[1]) < 1e-6 * values[1]);
  // Passes of fewer copies (the memory cap of real sizes): the same Jacobian and values.
  for (const maxCopies of [1, 3, 7]) {
    const cut = noLeak(() => inputJacobian(logitsFn, one, undefined, maxCopies));
    for (let i = 0; i < j.data.length; i++)
      assert.ok(Math.abs(cut.data[i] - j.data[i]) < 1e-6, `maxCopies ${maxCopies}, entry ${i}`);
    const v = noLeak(() => networkLipschitz(vit, images, { copiesPerPass: maxCopies }));
    for (let e = 0; e < 3; e++)
      close(v[e], values[e], 1e-6, `copiesPerPass ${maxCopies}, example ${e}`);
  }
  assert.throws(
    () => networkLipschitz(vit, images, { copiesPerPass: 0 }),
    /copiesPerPass must be a positive integer/,
  );
  assert.throws(() => inputJacobian(logitsFn, one, undefined, 0), /maxCopies must be at least 1/);
  const badMask = tf.ones([3, 5]);
  assert.throws(() => networkLipschitz(vit, images, { mask: badMask }), /text models only/);
  tf.dispose([one, badMask]);
});

test("text model with padding: only real rows count; padding does not change the value", () => {
  const text = createModel(tinyText, 4);
  randomizeWeights(text, 12, 0.3);
  const ids = tf.tensor2d(randomInts(2 * 8, 6, 20), [2, 8], "int32");
  const mask = tf.tensor2d([1, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1], [2, 8]);
  const values = noLeak(() => networkLipschitz(text, ids, { mask }));
  const onePerPass = noLeak(() => networkLipschitz(text, ids, { mask, copiesPerPass: 1 }));
  for (let e = 0; e < 2; e++)
    close(onePerPass[e], values[e], 1e-6, `one copy per pass, example ${e}`);
  // unpadded: the first 5 tokens of example 0 alone
  const short = tf.slice(ids, [0, 0], [1, 5]);
  const alone = networkLipschitz(text, short);
  close(values[0], alone[0], 1e-4, "padding invariance");
  // dense oracle over the real rows, built independently (padding rows appended by concat)
  const seq = tf.tidy(() => text.embed(tf.slice(ids, [0, 0], [1, 8])));
  const real = tf.slice(seq, [0, 0, 0], [1, 5, 8]);
  const pad = tf.slice(seq, [0, 5, 0], [1, 3, 8]);
  const m0 = tf.slice(mask, [0, 0], [1, 8]);
  const f: TensorFn = (e) =>
    text.forwardFromEmbeddings(tf.concat([e, pad], 1), { mask: m0 }).logits;
  close(values[0], denseLipschitz(f, real), 1e-4, "text dense");
  // block and head power iteration under the mask vs dense on the real rows
  const first = tf.slice(ids, [0, 0], [1, 8]);
  const { logits, trace } = text.forward(first, { trace: true, mask: m0 });
  tf.dispose([logits, first]);
  assert.ok(trace);
  const allowed = tf.tensor4d([1, 1, 1, 1, 1, 0, 0, 0], [1, 1, 1, 8]);
  const restrict =
    (g: TensorFn, rest: tf.Tensor): TensorFn =>
    (e) =>
      tf.slice(g(tf.concat([e, rest], 1)), [0, 0, 0], [1, 5, -1]);
  for (const b of [0, 1]) {
    const p = blockParams(text.params, b);
    const xin = trace.blocks[b].input;
    const r = noLeak(() => blockLipschitz(text, b, xin, m0, PI));
    const [head, tail] = [tf.slice(xin, [0, 0, 0], [1, 5, 8]), tf.slice(xin, [0, 5, 0], [1, 3, 8])];
    const truth = denseLipschitz(
      restrict((x) => transformerBlock(x, p, text.blockConfig, { allowed }).out, tail),
      head,
    );
    close(r.value, truth, 1e-5, `masked block ${b}`);
    madeBy(r, `masked block ${b}`);
    const ai = trace.blocks[b].attnInput;
    const [ah, at] = [tf.slice(ai, [0, 0, 0], [1, 5, 8]), tf.slice(ai, [0, 5, 0], [1, 3, 8])];
    const hr = noLeak(() => headLipschitz(text, b, 1, ai, m0, PI));
    const ht = denseLipschitz(
      restrict((x) => headOutput(x, p.attn, 2, 1, allowed), at),
      ah,
    );
    close(hr.value, ht, 1e-5, `masked head ${b}`);
    madeBy(hr, `masked head ${b}`);
    tf.dispose([head, tail, ah, at]);
  }
  disposeTrace(trace);
  const noReal = tf.zeros([2, 8]);
  assert.throws(() => networkLipschitz(text, ids, { mask: noReal }), /no real token/);
  tf.dispose([noReal, ids, mask, short, seq, real, pad, m0, allowed]);
  text.dispose();
});
