import { test } from "node:test";
import assert from "node:assert/strict";
import { tf, useBackend } from "../../src/backend.ts";
import { modelPreset } from "../../src/nn/config.ts";
import { createModel } from "../../src/nn/create.ts";
import type { TransformerClassifier } from "../../src/nn/model.ts";
import { fgsm } from "../../src/robustness/fgsm.ts";
import { pgd } from "../../src/robustness/pgd.ts";
import { apgdIn } from "../../src/robustness/apgd.ts";
import { evaluateRobustness } from "../../src/robustness/evaluate.ts";
import { imageBatch } from "../../src/robustness/inputSpace.ts";
import { lipschitzProxy } from "../../src/robustness/lipschitzProxy.ts";
import {
  crossEntropyGradient,
  inferenceLogits,
  logitRowProblem,
} from "../../src/robustness/loss.ts";
import { resolveAttackOptions } from "../../src/robustness/options.ts";
import { InputError } from "../../src/util/errors.ts";

await useBackend("wasm");

/**
 * Issue 38 case 2: a model that rules a class out with a logit of -inf (probability 0) is a
 * valid model; NaN, +inf and a row with every class at -inf are not.
 */

const base = createModel(modelPreset("vit-micro"), 3) as TransformerClassifier;
const C = base.config.classes;
const N = 6;
const x = tf.randomUniform([N, 28, 28, 1], 0, 1, "float32", 11);
/** Labels: class 3 (the masked one) for example 2, so a ruled-out true class is covered too. */
const labels = [0, 1, 3, 5, 7, 9];

/** The base model with `value` added to the logits of `classes` (a new model view; same weights). */
function withLogits(value: number, classes: readonly number[]): TransformerClassifier {
  const offset = new Float32Array(C);
  for (const k of classes) offset[k] = value;
  const model = Object.create(base) as TransformerClassifier;
  model.forward = (input, options) => ({
    logits: tf.tidy(() => tf.add(base.forward(input, options).logits, tf.tensor2d(offset, [1, C]))),
    trace: null,
  });
  return model;
}

/** Runs an attack and returns its result's values (the tensor disposed). */
function values(make: () => tf.Tensor): Float32Array {
  const t = make();
  const v = t.dataSync() as Float32Array;
  t.dispose();
  return v;
}

/** APGD through its registered run, on the whole batch. */
function apgd(model: TransformerClassifier, norm: "linf" | "l2", eps: number): tf.Tensor {
  const y = tf.tensor1d(labels, "int32");
  try {
    return apgdIn({
      batch: imageBatch(model, x, [0, 1]),
      kind: "image",
      labels: y,
      settings: resolveAttackOptions({ norm, eps, steps: 5, seed: 1, restarts: 2 }, "apgd"),
      who: "apgd",
      onWarning: () => {},
    });
  } finally {
    y.dispose();
  }
}

const attacks = (model: TransformerClassifier) =>
  ({
    "fgsm linf": () => fgsm(model, x, labels, { eps: 0.05, onWarning: () => {} }),
    "fgsm l2": () => fgsm(model, x, labels, { eps: 1, norm: "l2", onWarning: () => {} }),
    "pgd linf": () => pgd(model, x, labels, { eps: 0.05, steps: 4, seed: 2, onWarning: () => {} }),
    "pgd l2": () =>
      pgd(model, x, labels, { eps: 1, norm: "l2", steps: 4, seed: 2, onWarning: () => {} }),
    "apgd linf": () => apgd(model, "linf", 0.05),
    "apgd l2": () => apgd(model, "l2", 1),
  }) as const;

test("logitRowProblem: -inf is a valid logit; NaN, +inf and an all -inf row are not", () => {
  assert.equal(logitRowProblem([-Infinity, 0, 2], 3, 0), null);
  assert.equal(logitRowProblem([0, 1, -Infinity, -Infinity], 2, 1), "is -Infinity for every class");
  assert.equal(logitRowProblem([0, Number.NaN], 2, 0), "holds NaN");
  assert.equal(logitRowProblem([-Infinity, Infinity], 2, 0), "holds +Infinity");
});

test("a class masked at -inf: the loss gradient is finite and equals the one with the class at -1e30", () => {
  const masked = withLogits(-Infinity, [3]);
  const y = tf.tensor1d(labels, "int32");
  const g = values(() => crossEntropyGradient(inferenceLogits(masked), y)(x));
  const ref = values(() => crossEntropyGradient(inferenceLogits(withLogits(-1e30, [3])), y)(x));
  y.dispose();
  assert.ok(g.every(Number.isFinite), "finite gradient");
  assert.ok(
    g.some((v) => v !== 0),
    "a gradient to follow",
  );
  assert.deepEqual(g, ref);
});

test("FGSM, PGD and APGD on a model with a class masked at -inf: finite, and the same inputs as with -1e30", () => {
  const before = tf.memory().numTensors;
  const masked = attacks(withLogits(-Infinity, [3]));
  const reference = attacks(withLogits(-1e30, [3]));
  for (const name of Object.keys(masked) as (keyof typeof masked)[]) {
    const a = values(masked[name]);
    assert.ok(a.every(Number.isFinite), `${name}: finite`);
    assert.deepEqual(a, values(reference[name]), `${name}: as with -1e30`);
    assert.notDeepEqual(a, x.dataSync(), `${name}: the attack moved`);
  }
  assert.equal(tf.memory().numTensors, before, "no tensor left behind");
});

test("evaluateRobustness and lipschitzProxy accept masked classes: finite accuracies, margins and radii, never NaN", () => {
  const masked = withLogits(-Infinity, [3, 4]);
  const options = { eps: [0, 0.05, 0.2], attack: ["fgsm", "pgd", "apgd"], steps: 4, batchSize: 4 };
  const ev = evaluateRobustness(masked, x, labels, options);
  const ref = evaluateRobustness(withLogits(-1e30, [3, 4]), x, labels, options);
  assert.ok(Number.isFinite(ev.cleanAccuracy));
  assert.equal(ev.cleanCorrect[2], 0, "a true class ruled out is never predicted");
  for (const [i, r] of ev.results.entries())
    for (const name of ["fgsm", "pgd", "apgd"]) {
      const outcome = r.attacks[name]!;
      assert.ok(Number.isFinite(outcome.robustAccuracy), `eps ${r.eps} ${name}`);
      assert.deepEqual(
        outcome.success,
        ref.results[i].attacks[name]!.success,
        `eps ${r.eps} ${name}`,
      );
    }
  const proxy = lipschitzProxy(masked, x, labels);
  assert.equal(proxy.margins[2], -Infinity, "the true class is ruled out: misclassified");
  assert.equal(proxy.radii[2], 0);
  assert.ok(
    proxy.radii.every((r) => !Number.isNaN(r)) && proxy.margins.every((m) => !Number.isNaN(m)),
  );
  const refProxy = lipschitzProxy(withLogits(-1e30, [3, 4]), x, labels);
  for (const i of [0, 1, 3, 4, 5])
    assert.equal(proxy.margins[i], refProxy.margins[i], `margin ${i}`);
  // One live class: the margin of its examples is +inf (no perturbation changes the prediction).
  const single = lipschitzProxy(withLogits(-Infinity, [1, 2, 3, 4, 5, 6, 7, 8, 9]), x, labels);
  assert.equal(single.margins[0], Infinity);
  assert.equal(single.radii[0], Infinity);
  assert.equal(single.margins[1], -Infinity);
});

test("logits with NaN, +inf or every class at -inf are refused by every attack, evaluateRobustness and lipschitzProxy", () => {
  for (const [model, what] of [
    [withLogits(Number.NaN, [2]), "holds NaN"],
    [withLogits(Infinity, [2]), "holds \\+Infinity"],
    [
      withLogits(
        -Infinity,
        Array.from({ length: C }, (_, k) => k),
      ),
      "is -Infinity for every class",
    ],
  ] as const) {
    const message = new RegExp(
      `^model: its logits are not a class distribution: input 1 of \\d+ ${what}; .*-Infinity alone is allowed` +
        (what.startsWith("is -Infinity")
          ? " for some classes, not for all"
          : ": a class the model rules out"),
    );
    const refused = (name: string, run: () => unknown) =>
      assert.throws(
        run,
        (e: unknown) => e instanceof InputError && message.test(e.message),
        `${name}: ${what}`,
      );
    const before = tf.memory().numTensors;
    for (const [name, run] of Object.entries(attacks(model))) refused(name, run);
    refused("evaluateRobustness", () =>
      evaluateRobustness(model, x, labels, {
        eps: [0, 0.1],
        attack: ["fgsm", "pgd", "apgd"],
        steps: 2,
      }),
    );
    refused("lipschitzProxy", () => lipschitzProxy(model, x, labels));
    assert.equal(tf.memory().numTensors, before, `${what}: no tensor left behind`);
  }
});

test("teardown", () => {
  x.dispose();
  base.dispose();
});
