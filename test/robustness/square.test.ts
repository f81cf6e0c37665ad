import { test } from "node:test";
import assert from "node:assert/strict";
import { tf, useBackend } from "../../src/backend.ts";
import type { TransformerClassifier } from "../../src/nn/model.ts";
import { TextClassifier } from "../../src/nn/textClassifier.ts";
import {
  embeddingBatch,
  embeddingSpace,
  evaluateTextRobustness,
  imageBatch,
  rangeRadius,
  resolveAttackOptions,
  squareLayout,
  squareP,
  squareWithBatch,
  NO_CLIP,
} from "../../src/robustness/index.ts";
import { squareEta, squareWindow } from "../../src/robustness/square.ts";
import { tinyText } from "../helpers/tinyText.ts";

// The Square attack's schedule, layouts and windows, its budget, and its run in token-embedding
// space (padding rows never move, no clipping).

await useBackend("wasm");

test("Square's p schedule halves p_init at the paper's breakpoints, rescaled to the query budget", () => {
  assert.equal(squareP(0, 10000), 0.8);
  assert.equal(squareP(10, 10000), 0.8);
  assert.equal(squareP(11, 10000), 0.4);
  assert.equal(squareP(51, 10000), 0.2);
  assert.equal(squareP(8001, 10000), 0.8 / 512);
  // 5,000 queries: the same schedule at half the iterations (it = 2 * iteration of 10,000).
  assert.equal(squareP(6, 5000), 0.4);
  assert.equal(squareP(2600, 5000), 0.8 / 128);
  assert.equal(squareP(0, 100, 0.05), 0.05);
});

test("Square's layout: images as they are, token embeddings as tokens x entries, flat inputs as one row; windows cover the fraction p", () => {
  assert.deepEqual(squareLayout([2, 28, 28, 1]), { h: 28, w: 28, c: 1 });
  assert.deepEqual(squareLayout([2, 32, 32, 3]), { h: 32, w: 32, c: 3 });
  assert.deepEqual(squareLayout([2, 12, 64]), { h: 12, w: 64, c: 1 });
  assert.deepEqual(squareLayout([2, 784]), { h: 1, w: 784, c: 1 });
  assert.deepEqual(squareWindow(0.05, { h: 28, w: 28, c: 1 }, 1, false), [6, 6]);
  // Fewer rows than the side: every row, widened to about s^2 entries.
  assert.deepEqual(squareWindow(0.5, { h: 4, w: 64, c: 1 }, 1, false), [4, 30]);
  assert.deepEqual(squareWindow(0.05, { h: 1, w: 784, c: 1 }, 1, false), [1, 36]);
  // l_2: odd and at least 3.
  assert.deepEqual(squareWindow(0.001, { h: 28, w: 28, c: 1 }, 3, true), [3, 3]);
  const eta = squareEta(5, 5, false);
  assert.ok(Math.abs(eta.reduce((a, v) => a + v * v, 0) - 1) < 1e-12, "unit l_2 norm");
  assert.ok(eta[0] > 0 && eta[24] < 0, "the upper half positive, the lower negative");
});

/** Two classes on [b, 4] inputs in [0, 1]: logits [x_0, 0.5]. */
const linear = {
  config: { classes: 2 },
  forward: (t: tf.Tensor) => ({
    logits: tf.tidy(() => {
      const first = tf.slice(tf.reshape(t, [t.shape[0] as number, -1]), [0, 0], [-1, 1]);
      return tf.concat([first, tf.fill(first.shape, 0.5)], 1);
    }),
  }),
} as unknown as TransformerClassifier;

test("Square spends at most its budget, stops on an input once it is broken, and returns x at eps 0", () => {
  const x = tf.tensor2d([
    [0.9, 0, 0, 0],
    [0.52, 1, 1, 1],
    [0.1, 0.5, 0.5, 0.5],
  ]);
  const y = tf.tensor1d([0, 0, 0], "int32");
  const batch = imageBatch(linear, x, [0, 1]);
  let used: Uint32Array = new Uint32Array();
  const settings = resolveAttackOptions({ eps: 0.05, queries: 40, seed: 3 }, "test");
  const adv = squareWithBatch(
    { batch, kind: "image", labels: y, settings, who: "square" },
    { onQueries: (q) => (used = q) },
  );
  const a = adv.arraySync() as number[][];
  // Input 0 (0.9, margin 0.4) cannot fall within 0.05: the whole budget, 1 + 40 queries.
  assert.equal(used[0], 41);
  // Input 1 (0.52) falls as soon as its first entry moves down: far fewer queries.
  assert.ok(used[1] < 41 && a[1][0] < 0.5, `input 1: ${used[1]} queries, x_0 ${a[1][0]}`);
  // Input 2 is misclassified from the start: one query.
  assert.equal(used[2], 1);
  const zero = squareWithBatch({
    batch,
    kind: "image",
    labels: y,
    settings: { ...settings, eps: 0 },
    who: "square",
  });
  assert.deepEqual(zero.arraySync(), x.arraySync());
  tf.dispose([x, y, adv, zero]);
});

test("Square in token-embedding space: padding rows untouched, inside the ball without clipping, the same points with the same seed", () => {
  const m = new TextClassifier(tinyText({ vocabSize: 50, classes: 3 }), 1);
  const ids = tf.tensor2d(
    [
      [2, 5, 6, 9, 0, 0],
      [2, 7, 8, 0, 0, 0],
      [2, 11, 12, 13, 14, 15],
    ],
    [3, 6],
    "int32",
  );
  const mask = tf.tidy(() => tf.cast(tf.notEqual(ids, 0), "float32"));
  const labels = tf.tensor1d([0, 1, 2], "int32");
  const batch = embeddingBatch(m, { ids, mask });
  const maskData = mask.arraySync() as number[][];
  for (const [norm, eps] of [
    ["linf", 0.5],
    ["l2", 2],
  ] as const) {
    const settings = resolveAttackOptions(
      { norm, eps, queries: 30, seed: 5, clip: NO_CLIP },
      "test",
    );
    const run = () =>
      squareWithBatch({ batch, kind: "embedding", labels, settings, who: "squareEmbedding" });
    const adv = run();
    const again = run();
    assert.deepEqual(adv.dataSync(), again.dataSync(), `${norm}: seeded`);
    const d = tf.tidy(() => tf.sub(adv, batch.x).arraySync()) as number[][][];
    d.forEach((rows, b) => {
      let s = 0;
      rows.forEach((row, i) =>
        row.forEach((v) => {
          if (maskData[b][i] === 0)
            assert.equal(v, 0, `${norm}: padding row ${i} of input ${b} moved`);
          if (norm === "linf") assert.ok(Math.abs(v) <= eps * (1 + 1e-6));
          s += v * v;
        }),
      );
      if (norm === "l2") assert.ok(Math.sqrt(s) <= eps * (1 + 1e-5), `l_2 ${Math.sqrt(s)}`);
      assert.ok(s > 0, `${norm}: input ${b} moved`);
    });
    tf.dispose([adv, again]);
  }
  batch.dispose();
  tf.dispose([ids, mask, labels]);
  m.dispose();
});

test("AutoAttack on a 3-class text model in embedding space: APGD-T's note, the range check from the embeddings' own range, robust <= clean", () => {
  const m = new TextClassifier(tinyText({ vocabSize: 50, classes: 3 }), 2);
  const ids = tf.tensor2d(
    [
      [2, 5, 6, 9, 0, 0],
      [2, 7, 8, 0, 0, 0],
      [2, 11, 12, 13, 14, 15],
      [2, 21, 22, 0, 0, 0],
    ],
    [4, 6],
    "int32",
  );
  const mask = tf.tidy(() => tf.cast(tf.notEqual(ids, 0), "float32"));
  // The model's own predictions: clean accuracy 1.
  const labels = Array.from(
    tf.tidy(() => tf.argMax(m.forward(ids, { mask }).logits, 1)).dataSync(),
  );
  const space = embeddingSpace(m, { ids, mask });
  const range = rangeRadius(space, "linf")!;
  const e = tf.tidy(() => m.tokenEmbeddings(ids));
  const width = tf.tidy(() => tf.sub(tf.max(e), tf.min(e)).dataSync()[0]);
  assert.ok(Math.abs(range.max - width) <= 1e-6 * width, `${range.max} vs ${width}`);
  assert.match(range.what, /width of the range \[.*\] of the inputs' token-embedding entries/);
  const ev = evaluateTextRobustness(m, { ids, mask }, labels, {
    eps: [0, 0.5],
    attack: "autoattack",
    steps: 3,
    queries: 30,
    rangeEps: range.max,
  });
  assert.equal(ev.cleanAccuracy, 1);
  assert.deepEqual(ev.notes, [
    "apgd-t: 2 target classes (every class but the true one; the model has 3), not 9; " +
      "its loss's scale is z_pi1 - z_pi3 (no 4th class for (z_pi3 + z_pi4) / 2)",
  ]);
  assert.ok(ev.results[1].attacks.autoattack!.robustAccuracy <= 1);
  assert.equal(ev.range!.eps, range.max);
  assert.equal(
    ev.range!.attacks.autoattack!.robustAccuracy,
    0,
    "every input falls at the range's radius",
  );
  tf.dispose([ids, mask, e]);
  m.dispose();
});
