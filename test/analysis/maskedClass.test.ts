// analyze takes a model that rules a class out with a logit of -Infinity (a masked class), as
// attack does (test/robustness/maskedClass.test.ts): the bounds and true values are about the
// Jacobian, which an additive -Infinity leaves as it is. NaN, +Infinity and a row that is
// -Infinity for every class are still refused, naming the inputs.
import { test } from "node:test";
import assert from "node:assert/strict";
import { tf, useBackend } from "../../src/backend.ts";
import { analyze } from "../../src/analysis/analyze.ts";
import { modelPreset } from "../../src/nn/config.ts";
import { createModel } from "../../src/nn/create.ts";
import type { TransformerClassifier } from "../../src/nn/model.ts";
import { analyzeInWorkers } from "../../src/parallel/analyzeTask.ts";
import { InputError } from "../../src/util/errors.ts";

await useBackend("wasm");

/** vit-micro (seed 3) with `value` in the head's bias at `classes`: those logits become `value`. */
function withBias(value: number, classes: readonly number[]): TransformerClassifier {
  const model = createModel(modelPreset("vit-micro"), 3) as TransformerClassifier;
  const b = model.getWeights().get("head.b")!;
  const data = Float32Array.from(b.data);
  for (const k of classes) data[k] = value;
  model.setWeights({ "head.b": { data, shape: b.shape } }, { partial: true });
  return model;
}

const x = tf.randomUniform([3, 28, 28, 1], 0, 1, "float32", 7);
const options = { maxIterations: 60, truth: { heads: false, blocks: true, network: true } };

test("analyze accepts -Infinity logits (a masked class): the same bounds and true values as without the mask", async () => {
  const plain = withBias(0, []);
  const masked = withBias(-Infinity, [3, 4]);
  try {
    const logits = tf.tidy(() => masked.forward(x).logits.dataSync());
    assert.equal(logits[3], -Infinity, "the model really rules class 3 out");
    const a = analyze(plain, x, options);
    const b = analyze(masked, x, options);
    assert.ok(
      b.network.true.every((v) => Number.isFinite(v) && v > 0),
      `true ${b.network.true}`,
    );
    assert.deepEqual(b.network.true, a.network.true);
    assert.deepEqual(b.network.bounds, a.network.bounds);
    assert.deepEqual(b.compositionFloor, a.compositionFloor);
    assert.deepEqual(
      b.blocks.map((k) => [k.true, k.bounds]),
      a.blocks.map((k) => [k.true, k.bounds]),
    );
    // Worker threads take the same path.
    const inWorkers = await analyzeInWorkers(masked, x, { ...options, workers: 2 });
    assert.deepEqual(inWorkers.network.true, b.network.true);
  } finally {
    plain.dispose();
    masked.dispose();
  }
});

test("analyze still refuses NaN, +Infinity and an every-class -Infinity row, naming the inputs", () => {
  const cases: [TransformerClassifier, RegExp][] = [
    [
      withBias(NaN, [2]),
      /^model: its logits are not finite at inputs 1, 2, 3: .*\(a logit of -Infinity alone is allowed/,
    ],
    [withBias(Infinity, [0]), /^model: its logits are not finite at inputs 1, 2, 3: /],
    [
      withBias(-Infinity, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]),
      /^model: its logits are -Infinity for every class at inputs 1, 2, 3: the model rules out every class/,
    ],
  ];
  for (const [model, expected] of cases)
    try {
      const before = tf.memory().numTensors;
      assert.throws(
        () => analyze(model, x, options),
        (e: unknown) => e instanceof InputError && expected.test(e.message),
      );
      assert.equal(tf.memory().numTensors, before, "no tensor left behind");
    } finally {
      model.dispose();
    }
});
