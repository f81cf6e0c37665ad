// Issue 12: attacks in worker threads. Each batch's random starts depend only on (seed, eps,
// batch index), so whole batches attacked by different workers and joined in order must give
// the single-thread evaluation and proxy, example for example.
import { test } from "node:test";
import assert from "node:assert/strict";
import { tf, useBackend } from "../../src/backend.ts";
import { modelPreset } from "../../src/nn/config.ts";
import { createModel } from "../../src/nn/create.ts";
import type { TransformerClassifier } from "../../src/nn/model.ts";
import { attackInWorkers } from "../../src/parallel/attackTask.ts";
import { IMAGE_INPUTS, TEXT_INPUTS, type ModelInputs } from "../../src/robustness/modelInputs/index.ts";
import { NO_CLIP } from "../../src/robustness/inputSpace.ts";
import type { RobustnessEvaluation } from "../../src/robustness/evaluate.ts";
import { tinyText } from "../helpers/tinyText.ts";

await useBackend("wasm");

/** An evaluation's per-example flags and accuracies (everything but the wall time). */
function flags(e: RobustnessEvaluation) {
  return JSON.stringify({
    clean: Array.from(e.cleanCorrect),
    results: e.results.map((r) => ({
      eps: r.eps,
      stepSize: r.stepSize,
      attacks: Object.fromEntries(
        Object.entries(r.attacks).map(([k, o]) => [
          k,
          { robust: o!.robustAccuracy, success: Array.from(o!.success), zero: Array.from(o!.zeroGradient), fraction: o!.zeroGradientFraction },
        ]),
      ),
    })),
  });
}

test("images attacked by 2 workers (3 batches): the single-thread robust accuracies, flags and proxy radii, example for example", async () => {
  const model = createModel(modelPreset("vit-micro"), 5) as TransformerClassifier;
  const inputs = await IMAGE_INPUTS.load(model, { who: "attack", data: "mnist", trained: null, seed: 0, n: 70 }, {});
  try {
    const options = { eps: [0, 0.05, 0.2], attack: ["fgsm", "pgd"], steps: 3, batchSize: 32, seed: 7 };
    const one = await attackInWorkers(model, inputs, { ...options, workers: 1 });
    const progress: number[] = [];
    const two = await attackInWorkers(model, inputs, { ...options, workers: 2, onProgress: (done) => progress.push(done) });
    assert.equal(flags(two.evaluation), flags(one.evaluation));
    assert.deepEqual(Array.from(two.proxy.radii), Array.from(one.proxy.radii));
    assert.deepEqual(Array.from(two.proxy.lipschitz), Array.from(one.proxy.lipschitz));
    assert.equal(two.proxy.misclassified, one.proxy.misclassified);
    assert.equal(Math.max(...progress), 3 * 2 * 2); // batches x non-zero eps x attacks
    // The attack did something: pgd at 0.2 is below clean accuracy on a random-init model.
    assert.ok(one.evaluation.results[2].attacks.pgd!.robustAccuracy <= one.evaluation.cleanAccuracy);
  } finally {
    inputs.dispose();
    model.dispose();
  }
});

test("text attacked by 2 workers in embedding space (padding masked): the single-thread results", async () => {
  const model = createModel(tinyText({ vocabSize: 40, maxLength: 8 }), 3) as unknown as TransformerClassifier;
  const n = 10;
  const ids = tf.tensor2d(Array.from({ length: n * 6 }, (_, i) => (i % 6 === 0 ? 1 : 3 + ((i * 11) % 30))), [n, 6], "int32");
  const mask = tf.tensor2d(Array.from({ length: n * 6 }, (_, i) => (i % 6 < 2 + (Math.floor(i / 6) % 5) ? 1 : 0)), [n, 6]);
  const inputs: ModelInputs = {
    spec: "test",
    info: undefined as never,
    count: n,
    labels: Int32Array.from({ length: n }, (_, i) => i % 2),
    x: ids,
    mask,
    space: TEXT_INPUTS.space(model, ids, mask, NO_CLIP),
    checkEps: () => {},
    dispose: () => tf.dispose([ids, mask]),
  };
  try {
    const options = { eps: [0, 0.5], norm: "l2" as const, steps: 2, batchSize: 4, seed: 1 };
    const one = await attackInWorkers(model, inputs, { ...options, workers: 1 });
    const two = await attackInWorkers(model, inputs, { ...options, workers: 2 });
    assert.equal(flags(two.evaluation), flags(one.evaluation));
    assert.deepEqual(Array.from(two.proxy.radii), Array.from(one.proxy.radii));
  } finally {
    inputs.dispose();
    model.dispose();
  }
});

test("bad settings are refused before any worker starts, as in one thread", async () => {
  const model = createModel(modelPreset("vit-micro"), 5) as TransformerClassifier;
  const inputs = await IMAGE_INPUTS.load(model, { who: "attack", data: "mnist", trained: null, seed: 0, n: 40 }, {});
  try {
    for (const workers of [1, 2])
      await assert.rejects(
        attackInWorkers(model, inputs, { eps: [0, 8], batchSize: 16, workers }),
        (e: unknown) => e instanceof RangeError && /attack: eps 8 is larger than the width 1 of the input range \[0, 1\]/.test((e as Error).message),
      );
  } finally {
    inputs.dispose();
    model.dispose();
  }
});
