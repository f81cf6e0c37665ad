// The explorer's prediction is the argmax of the logits (src/util/predictedClass.ts), as its
// attack panel's: on near-tied logits the float32 softmax probabilities tie, and their argmax
// (the page's former rule) named another class than the attack's eps-0 point.
import { test } from "node:test";
import assert from "node:assert/strict";
import { useBackend } from "../../src/backend.ts";
import {
  attackCurve,
  inspect,
  inspectText,
  predict,
  predictText,
  textAttackCurve,
} from "../../src/explorer/compute.ts";
import { createModel } from "../../src/nn/create.ts";
import type { TransformerClassifier } from "../../src/nn/model.ts";
import { NonFiniteError } from "../../src/util/errors.ts";
import { predictedClass } from "../../src/util/predictedClass.ts";

await useBackend("cpu");

test("predictedClass: the largest logit, the first of equal ones, never a -Infinity class", () => {
  assert.equal(predictedClass([0, 1e-8, 0]), 1, "a gap softmax loses in float32");
  assert.equal(predictedClass([2, 2, 1]), 0, "ties: the first, as tf.argMax");
  assert.equal(predictedClass([-Infinity, -5, -7]), 1);
  assert.equal(predictedClass(new Float32Array([-Infinity, -Infinity, 3])), 2);
  for (const [row, what] of [
    [[0, NaN], /class 1 is NaN/],
    [[Infinity, 0], /class 0 is Infinity/],
    [[-Infinity, -Infinity], /every class is -Infinity/],
  ] as const)
    assert.throws(
      () => predictedClass(row, "explore"),
      (e: unknown) =>
        e instanceof NonFiniteError && /^explore: logits: /.test(e.message) && what.test(e.message),
      String(row),
    );
  assert.throws(() => predictedClass([]), /empty row/);
});

/**
 * A model whose logits are the head's bias [0, 1e-8, 0, ...] plus a term of about 1e-11 from
 * a head scaled down 1e-12: class 1 leads by 1e-8, which float32 softmax rounds away (every
 * probability 1/classes); the network keeps a nonzero, finite Jacobian for the bounds.
 */
function nearTie(preset: "vit-micro" | "text-micro"): TransformerClassifier {
  const model = createModel(preset, 5) as TransformerClassifier;
  const w = model.getWeights().get("head.w")!;
  const b = model.getWeights().get("head.b")!;
  const bias = new Float32Array(b.data.length);
  bias[1] = 1e-8;
  model.setWeights(
    {
      "head.w": { data: Float32Array.from(w.data, (v) => v * 1e-12), shape: w.shape },
      "head.b": { data: bias, shape: b.shape },
    },
    { partial: true },
  );
  return model;
}

test("the explorer's prediction on near-tied logits is the logits' argmax, the attack's eps-0 class (image and text models)", () => {
  const vit = nearTie("vit-micro");
  const text = nearTie("text-micro");
  try {
    const pixels = Array.from({ length: 784 }, (_, i) => ((i * 37) % 101) / 100);
    const ids = [1, 5, 9, 12, 4];
    const cases = [
      {
        what: "image",
        shown: inspect(vit, pixels),
        quick: predict(vit, pixels),
        attacked: attackCurve(vit, pixels, 0, "fgsm", [0], 1).points[0],
      },
      {
        what: "text",
        shown: inspectText(text, ids),
        quick: predictText(text, ids),
        attacked: textAttackCurve(text, ids, 0, "fgsm", "l2", [0], 1).points[0],
      },
    ];
    for (const { what, shown, quick, attacked } of cases) {
      // The case is real: the probabilities tie, so their argmax would say class 0.
      assert.equal(shown.probabilities[1], shown.probabilities[0], `${what}: tied probabilities`);
      assert.equal(shown.probabilities.indexOf(Math.max(...shown.probabilities)), 0);
      assert.ok(shown.logits[1] > shown.logits[0], `${what}: logits ${shown.logits.slice(0, 2)}`);
      assert.equal(shown.predicted, 1, `${what}: the page's prediction`);
      assert.equal(quick.predicted, 1, `${what}: predict()`);
      assert.equal(attacked.predicted, shown.predicted, `${what}: the attack at eps 0`);
      assert.ok(
        attacked.margin < 0,
        `${what}: class 0 is not the prediction (margin ${attacked.margin})`,
      );
    }
  } finally {
    vit.dispose();
    text.dispose();
  }
});
