import { test } from "node:test";
import assert from "node:assert/strict";
import { tf, useBackend } from "../../src/backend.ts";
import { createModel } from "../../src/nn/create.ts";
import type { ModelConfigInput } from "../../src/nn/config.ts";
import {
  batchTotals,
  jasminPenalty,
  jasminWithMeanSigma,
  meanTraceSigma,
  rowSigma,
} from "../../src/train/jasmin.ts";
import {
  microBatchForMemory,
  trainingBytesPerExample,
  WASM_HEAP_BYTES,
} from "../../src/train/memory.ts";
import { AdamW, clipByGlobalNorm, clipFactor, globalGradNorm } from "../../src/train/optimizer.ts";
import {
  batchGradients,
  lossGradients,
  trainStep,
  type JasminSettings,
} from "../../src/train/step.ts";
import { sigmaTop2Tensor } from "../../src/softmax/tensor.ts";

await useBackend("wasm");

const TEXT: ModelConfigInput = {
  kind: "text",
  vocabSize: 40,
  maxLength: 6,
  dModel: 8,
  heads: 2,
  blocks: 2,
  mlpHidden: 16,
  classes: 3,
  pooling: "cls",
};
const JASMIN: JasminSettings = { lambda: 0.3, norm: "top2", reduce: "max-log", layers: null };
const BERT_BASE = { dModel: 768, mlpHidden: 3072, heads: 12, blocks: 12 };
const MiB = 2 ** 20;

/** A padded text batch of 6 (lengths 6, 2, 4, 1, 5, 3). */
function textBatch() {
  const b = 6;
  const n = 6;
  const lengths = [6, 2, 4, 1, 5, 3];
  const x = tf.tensor2d(
    Array.from({ length: b * n }, (_, i) => (i % n === 0 ? 1 : 2 + ((i * 7) % 37))),
    [b, n],
    "int32",
  );
  const mask = tf.tensor2d(
    Array.from({ length: b * n }, (_, i) => (i % n < lengths[Math.floor(i / n)] ? 1 : 0)),
    [b, n],
  );
  const y = tf.tensor1d([0, 1, 2, 1, 0, 2], "int32");
  return { x, mask, y };
}

/** Runs one trainStep on a fresh copy of the text model; returns the weights' changes and the metrics. */
function stepOnFreshModel(microBatch: number | undefined, jasmin: JasminSettings) {
  const model = createModel(TEXT, 3);
  // epsilon 1: the update is smooth in the gradient (with 1e-8 a gradient that is float32 noise
  // around 0 gets an update of +-lr), so that summation-order differences stay small.
  const optimizer = new AdamW(model.params.parameters(), { weightDecay: 0.05, epsilon: 1 });
  const before = model.getWeights();
  const { x, mask, y } = textBatch();
  const tensors = tf.memory().numTensors;
  const metrics = trainStep(model, optimizer, x, y, {
    lr: 1,
    clip: 0,
    jasmin,
    mask,
    ...(microBatch === undefined ? {} : { microBatch }),
  });
  const leaked = tf.memory().numTensors - tensors;
  const after = model.getWeights();
  const delta = new Map(
    [...after].map(([k, w]) => [k, Array.from(w.data, (v, i) => v - before.get(k)!.data[i])]),
  );
  tf.dispose([x, mask, y]);
  optimizer.dispose();
  model.dispose();
  return { delta, metrics, leaked };
}

for (const reduce of ["max-log", "mean"] as const)
  test(`a step in micro-batches of 2 and 4 updates the weights as one pass over the batch does (padded text, JaSMin ${reduce}), to float32 rounding`, () => {
    const jasmin = { ...JASMIN, reduce };
    const whole = stepOnFreshModel(6, jasmin);
    for (const micro of [2, 4]) {
      const parts = stepOnFreshModel(micro, jasmin);
      assert.equal(parts.leaked, 0, "no tensor left behind");
      for (const [name, d] of whole.delta) {
        const scale = Math.max(1e-3, ...d.map(Math.abs));
        const diff = Math.max(...d.map((v, i) => Math.abs(v - parts.delta.get(name)![i])));
        assert.ok(
          diff <= 2e-5 * scale,
          `${name}, micro-batches of ${micro}: update differs by ${diff} (scale ${scale})`,
        );
      }
      for (const key of [
        "loss",
        "crossEntropy",
        "jasmin",
        "meanSigma",
        "correct",
        "gradNorm",
      ] as const)
        assert.ok(
          Math.abs(parts.metrics[key] - whole.metrics[key]) <=
            1e-5 * Math.max(1, Math.abs(whole.metrics[key])),
          `${key}: ${parts.metrics[key]} vs ${whole.metrics[key]}`,
        );
      assert.ok(whole.metrics.jasmin !== 0);
    }
  });

test("without microBatch a small model's step is one pass: bit-identical to microBatch = the batch size", () => {
  const auto = stepOnFreshModel(undefined, JASMIN);
  const one = stepOnFreshModel(6, JASMIN);
  const more = stepOnFreshModel(100, JASMIN);
  assert.deepEqual(auto.delta, one.delta);
  assert.deepEqual(more.delta, one.delta);
  assert.deepEqual(auto.metrics, one.metrics);
});

test("trainStep refuses a microBatch that is not an integer >= 1, naming it, before any change", () => {
  const model = createModel(TEXT, 3);
  const optimizer = new AdamW(model.params.parameters());
  const { x, mask, y } = textBatch();
  for (const bad of [0, -1, 1.5, NaN])
    assert.throws(
      () =>
        trainStep(model, optimizer, x, y, {
          lr: 1e-3,
          clip: 1,
          jasmin: JASMIN,
          mask,
          microBatch: bad,
        }),
      (e: Error) => e instanceof RangeError && /microBatch must be an integer >= 1/.test(e.message),
    );
  assert.equal(optimizer.step, 0);
  tf.dispose([x, mask, y]);
  optimizer.dispose();
  model.dispose();
});

test("the clipping factor passed to AdamW.apply gives the same update as applying clipByGlobalNorm's clipped gradients", () => {
  const make = () => {
    const w = tf.variable(
      tf.tensor2d([
        [1, -2],
        [3, 0.5],
      ]),
    );
    const b = tf.variable(tf.tensor1d([1, -1]));
    const opt = new AdamW(
      [
        { name: "l.w", variable: w, role: "weight" },
        { name: "l.b", variable: b, role: "bias" },
      ],
      { weightDecay: 0.1 },
    );
    return { w, b, opt };
  };
  const grads = [
    tf.tensor2d([
      [3, -4],
      [0.25, 12],
    ]),
    tf.tensor1d([-7, 2]),
  ];
  const a = make();
  const b = make();
  for (let step = 0; step < 3; step++) {
    const { clipped, norm } = clipByGlobalNorm(grads, 2);
    a.opt.apply(clipped, 0.1);
    const scale = clipFactor(globalGradNorm(grads), 2)!;
    b.opt.apply(grads, 0.1, scale);
    tf.dispose([...clipped, norm, scale]);
  }
  assert.deepEqual(b.w.dataSync(), a.w.dataSync());
  assert.deepEqual(b.b.dataSync(), a.b.dataSync());
  assert.equal(clipFactor(tf.scalar(5), 0), null);
  assert.equal(clipFactor(tf.scalar(5), Infinity), null);
  assert.throws(() => clipFactor(tf.scalar(5), -1), /maxNorm must be >= 0/);
  tf.dispose([...grads, a.w, a.b, b.w, b.b]);
  a.opt.dispose();
  b.opt.dispose();
});

test("AdamW.apply checks every gradient's shape before it changes any parameter", () => {
  const w = tf.variable(tf.tensor1d([1, 2]));
  const v = tf.variable(tf.tensor1d([3, 4, 5]));
  const opt = new AdamW([
    ["w", w],
    ["v", v],
  ] as [string, tf.Variable][]);
  const grads = [tf.tensor1d([1, 1]), tf.tensor1d([1, 1])];
  assert.throws(() => opt.apply(grads, 0.1), /gradient of "v" has shape \[2\], expected \[3\]/);
  assert.deepEqual(Array.from(w.dataSync()), [1, 2]);
  assert.equal(opt.step, 0);
  const scale = tf.tensor1d([1, 2]);
  assert.throws(
    () => opt.apply([grads[0], tf.tensor1d([1, 1, 1])], 0.1, scale),
    /gradScale must be a scalar/,
  );
  tf.dispose([w, v, ...grads, scale]);
  opt.dispose();
});

test("sigma_top2's own gradient (rowSigma top2) is exactly autodiff's of sigmaTop2Tensor, ties and zero entries included", () => {
  const p = tf.tensor3d(
    [
      [
        [0.5, 0.3, 0.2, 0],
        [0.25, 0.25, 0.25, 0.25],
        [1, 0, 0, 0],
      ],
      [
        [0.1, 0.6, 0.3, 0],
        [0.4, 0.4, 0.2, 0],
        [0, 0, 0.7, 0.3],
      ],
    ],
    [2, 3, 4],
  );
  const w = tf.tensor2d([
    [1, -2, 0.5],
    [3, 0.25, -1],
  ]);
  const ours = tf.grad((q: tf.Tensor) => tf.sum(tf.mul(rowSigma(q, "top2"), w)))(p);
  const autodiff = tf.grad((q: tf.Tensor) => tf.sum(tf.mul(sigmaTop2Tensor(q), w)))(p);
  assert.deepEqual(ours.dataSync(), autodiff.dataSync());
  assert.deepEqual(rowSigma(p, "top2").dataSync(), sigmaTop2Tensor(p).dataSync());
  tf.dispose([p, w, ours, autodiff]);
});

test("jasminWithMeanSigma gives exactly jasminPenalty's R and meanTraceSigma's mean, on a padded batch and a layer subset", () => {
  const model = createModel(TEXT, 3);
  const { x, mask, y } = textBatch();
  const { logits, trace } = model.forward(x, { trace: true, mask });
  for (const options of [
    { norm: "top2", reduce: "max-log" },
    { norm: "quad", reduce: "max", layers: [1] },
    { norm: "exact", reduce: "mean" },
  ] as const) {
    const both = jasminWithMeanSigma(trace!, options);
    const r = jasminPenalty(trace!, options);
    const s = meanTraceSigma(trace!, options.norm);
    assert.equal(both.penalty.dataSync()[0], r.dataSync()[0]);
    assert.equal(both.meanSigma.dataSync()[0], s.dataSync()[0]);
    tf.dispose([both.penalty, both.meanSigma, r, s]);
  }
  assert.throws(() => jasminWithMeanSigma(trace!, { layers: [5] }), /layer 5 does not exist/);
  tf.dispose([logits, x, mask, y]);
  for (const t of Object.values(trace!.blocks).flatMap((bl) => [bl.input, bl.attn.p])) t.dispose();
  model.dispose();
});

test("lossGradients leaves no tensor behind, with and without JaSMin", () => {
  const model = createModel(TEXT, 3);
  const { x, mask, y } = textBatch();
  for (const lambda of [0, 0.3]) {
    const before = tf.memory().numTensors;
    const figures = tf.tidy(() =>
      Array.from(
        lossGradients(model, x, y, { jasmin: { ...JASMIN, lambda }, mask }).figures.dataSync(),
      ),
    );
    assert.equal(tf.memory().numTensors, before);
    assert.ok(figures.every(Number.isFinite) && figures[2] > 0, `figures ${figures}`);
  }
  tf.dispose([x, mask, y]);
  model.dispose();
});

test("microBatchForMemory: BERT-base at 128 tokens takes a batch of 8 one example per pass in the wasm heap; small models take the whole batch", () => {
  assert.equal(Math.round(trainingBytesPerExample(BERT_BASE, 128) / MiB), 612);
  const bert = { config: BERT_BASE, tokens: 128, parameters: 109_483_778, liveBytes: 1253 * MiB };
  assert.equal(microBatchForMemory({ ...bert, batch: 8 }), 1);
  assert.equal(microBatchForMemory({ ...bert, batch: 1 }), 1);
  // Twice the heap holds more examples per pass, never more than the batch.
  assert.equal(microBatchForMemory({ ...bert, batch: 8, heapBytes: 2 * WASM_HEAP_BYTES }), 7);
  assert.equal(microBatchForMemory({ ...bert, batch: 4, heapBytes: 100 * WASM_HEAP_BYTES }), 4);
  const vitTiny = { dModel: 64, mlpHidden: 128, heads: 4, blocks: 4 };
  assert.equal(
    microBatchForMemory({
      config: vitTiny,
      tokens: 50,
      batch: 256,
      parameters: 200_000,
      liveBytes: 3e6,
    }),
    256,
  );
});

test("microBatchForMemory refuses, in one line naming the tokens, an example that cannot fit the wasm heap (BERT-base at 512 tokens stopped the process with 'Aborted()')", () => {
  const bert = { config: BERT_BASE, tokens: 128, parameters: 109_483_778, liveBytes: 1253 * MiB, batch: 8 };
  assert.throws(
    () => microBatchForMemory({ ...bert, tokens: 512 }),
    (e: Error) =>
      e.name === "InputError" &&
      /^train: one example of 512 tokens needs about 3\.4 GB in a training pass, and the wasm heap \(at most 4\.3 GB\) has 1\.7 GB beside the model.*shorter sequences/.test(e.message) &&
      !e.message.includes("\n"),
  );
  assert.throws(() => microBatchForMemory({ ...bert, liveBytes: WASM_HEAP_BYTES }), /one example of 128 tokens/);
  // Where the estimate says no but the measured size fits, one example per pass (not refused).
  assert.equal(microBatchForMemory({ ...bert, tokens: 200 }), 1);
});

test("microBatchForMemory and trainingBytesPerExample refuse bad sizes, naming the argument", () => {
  const ok = { config: BERT_BASE, tokens: 128, batch: 8, parameters: 1000, liveBytes: 0 };
  assert.throws(
    () => microBatchForMemory({ ...ok, batch: 0 }),
    /batch must be a positive integer, got 0/,
  );
  assert.throws(
    () => microBatchForMemory({ ...ok, parameters: 1.5 }),
    /parameters must be a positive integer/,
  );
  assert.throws(
    () => microBatchForMemory({ ...ok, liveBytes: NaN }),
    /liveBytes must be a finite number >= 0/,
  );
  assert.throws(
    () => microBatchForMemory({ ...ok, heapBytes: -1 }),
    /heapBytes must be a finite number >= 0/,
  );
  assert.throws(
    () => microBatchForMemory({ ...ok, tokens: 0 }),
    /tokens must be a positive integer/,
  );
  assert.throws(
    () => trainingBytesPerExample({ ...BERT_BASE, heads: 0 }, 128),
    /heads must be a positive integer, got 0/,
  );
});

test("batchGradients of a worker's slice (the whole batch's totals) in micro-batches of 2 equals its one-pass lossGradients", () => {
  const model = createModel(TEXT, 5);
  const { x, mask, y } = textBatch();
  // The slice of rows 1..4 of the batch, with the totals of all 6 rows (as src/parallel/trainTask.ts passes them).
  const totals = batchTotals(6, 6, mask.dataSync());
  const [xs, ms, ys] = [tf.slice(x, 1, 4), tf.slice(mask, 1, 4), tf.slice(y, 1, 4)];
  const one = tf.tidy(() => {
    const r = lossGradients(model, xs, ys, { jasmin: JASMIN, mask: ms, totals });
    return { grads: r.grads.map((g) => g.dataSync()), figures: Array.from(r.figures.dataSync()) };
  });
  const micro = tf.tidy(() => {
    const r = batchGradients(model, xs, ys, { jasmin: JASMIN, mask: ms, totals, microBatch: 2 });
    return { grads: r.grads.map((g) => g.dataSync()), figures: r.figures };
  });
  one.figures.forEach((f, i) =>
    assert.ok(
      Math.abs(micro.figures[i] - f) <= 1e-6 * Math.max(1, Math.abs(f)),
      `figure ${i}: ${micro.figures[i]} vs ${f}`,
    ),
  );
  for (let v = 0; v < one.grads.length; v++) {
    let top = 0;
    let diff = 0;
    for (let i = 0; i < one.grads[v].length; i++) {
      top = Math.max(top, Math.abs(one.grads[v][i]));
      diff = Math.max(diff, Math.abs(one.grads[v][i] - micro.grads[v][i]));
    }
    assert.ok(diff <= 1e-5 * top + 1e-9, `gradient ${v}: differs by ${diff} of ${top}`);
  }
  // Without a micro-batch setting a small model's slice is one pass, bit for bit.
  const whole = tf.tidy(
    () => batchGradients(model, xs, ys, { jasmin: JASMIN, mask: ms, totals }).figures,
  );
  assert.deepEqual(whole, one.figures);
  tf.dispose([x, mask, y, xs, ms, ys]);
  model.dispose();
});
