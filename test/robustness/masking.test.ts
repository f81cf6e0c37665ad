import { test } from "node:test";
import assert from "node:assert/strict";
import { tf, useBackend } from "../../src/backend.ts";
import type { TransformerClassifier } from "../../src/nn/model.ts";
import {
  checkGradient,
  evaluateRobustness,
  maskingChecks,
  nonFiniteGradientRows,
  rangeRadius,
  imageSpace,
} from "../../src/robustness/index.ts";
import { mulberry32 } from "../helpers/random.ts";

// Gradient masking on purpose: a model that rounds its inputs to quarters before a linear map
// has an input gradient of exactly 0 everywhere, so the gradient attacks cannot move, while
// Square (score-based) crosses the rounding steps. The four masking checks must fire on it,
// and stay quiet on a model whose gradient is usable.

await useBackend("wasm");

const C = 3;
const D = 16;
const N = 24;
const rand = mulberry32(7);
const W = tf.tensor2d(
  Array.from({ length: D * C }, () => 2 * rand() - 1),
  [D, C],
);

/** Inputs [b, 4, 4, 1] -> logits round(4 x) / 4 . W: a step in front of the logits. */
function linearModel(transform: (flat: tf.Tensor) => tf.Tensor): TransformerClassifier {
  return {
    config: { classes: C },
    forward: (x: tf.Tensor) => ({
      logits: tf.tidy(() => tf.matMul(transform(tf.reshape(x, [x.shape[0] as number, D])), W)),
    }),
  } as unknown as TransformerClassifier;
}

const quantized = linearModel((flat) => tf.div(tf.round(tf.mul(flat, 4)), 4));
const plain = linearModel((flat) => flat);
const x = tf.tensor4d(
  Array.from({ length: N * D }, () => rand()),
  [N, 4, 4, 1],
);
/** Each model's own predictions: clean accuracy 1, so every input can be broken. */
const labelsOf = (model: TransformerClassifier) =>
  Int32Array.from(tf.tidy(() => tf.argMax(model.forward(x).logits, 1)).dataSync());

test("a model that rounds its inputs: APGD-CE is stuck at 100%, Square breaks it, and all four masking checks fire", () => {
  const labels = labelsOf(quantized);
  for (const [norm, eps, range] of [
    ["linf", 0.3, 1],
    ["l2", 1, 4],
  ] as const) {
    const warnings: string[] = [];
    const ev = evaluateRobustness(quantized, x, labels, {
      norm,
      eps: [0, eps],
      attack: ["apgd", "square", "autoattack"],
      steps: 10,
      queries: 300,
      targets: 2,
      // From the clean point: with a zero gradient APGD-CE never moves.
      randomStart: false,
      rangeEps: range,
      onWarning: (m) => warnings.push(m),
    });
    assert.equal(ev.cleanAccuracy, 1);
    const r = ev.results[1].attacks;
    assert.equal(r.apgd!.robustAccuracy, 1, `${norm}: APGD-CE breaks nothing`);
    assert.equal(r.apgd!.zeroGradientFraction, 1, `${norm}: every gradient is exactly zero`);
    assert.equal(r.apgd!.lossNotRaisedFraction, 1, `${norm}: no loss rose`);
    assert.ok(
      r.square!.robustAccuracy <= 0.25,
      `${norm}: Square breaks it (${r.square!.robustAccuracy})`,
    );
    assert.equal(r.square!.zeroGradientFraction, null, "Square reads no gradient");
    assert.ok(
      r.autoattack!.robustAccuracy <= 0.25,
      `${norm}: so does AutoAttack, through its Square`,
    );
    assert.ok(
      r.autoattack!.brokenBy!.every((b) => b === null || b === "square"),
      "only Square breaks it",
    );
    assert.match(warnings[0], /exactly zero .* gradient masking/);
    const m = maskingChecks(ev);
    assert.equal(m.gradientFreeOnly.flag, true, m.gradientFreeOnly.line);
    assert.match(
      m.gradientFreeOnly.line,
      /Square\) broke inputs that every gradient attack left robust/,
    );
    assert.equal(m.rangeNotBroken.flag, true, m.rangeNotBroken.line);
    assert.match(
      m.rangeNotBroken.line,
      new RegExp(`left 24 of 24 inputs \\(100\\.0%\\) correct at eps ${range}`),
    );
    assert.equal(m.gradientUnusable.flag, true);
    assert.match(
      m.gradientUnusable.line,
      /exactly zero at inputs the attack left robust \(APGD-CE at eps [0-9.]+: 24 of 24/,
    );
    assert.equal(m.lossNotRaised.flag, true);
    assert.equal(m.warnings.length, 4);
  }
});

test("the same linear model without the rounding: APGD-CE breaks what Square breaks, and no check fires", () => {
  const labels = labelsOf(plain);
  const ev = evaluateRobustness(plain, x, labels, {
    eps: [0, 0.3],
    attack: ["apgd", "square", "autoattack"],
    steps: 10,
    queries: 300,
    targets: 2,
    rangeEps: 1,
  });
  const r = ev.results[1].attacks;
  assert.ok(r.apgd!.robustAccuracy < 1);
  const m = maskingChecks(ev);
  assert.deepEqual(
    [m.gradientFreeOnly.flag, m.rangeNotBroken.flag, m.gradientUnusable.flag, m.lossNotRaised.flag],
    [false, false, false, false],
    m.warnings.join("\n"),
  );
  assert.deepEqual(m.warnings, []);
});

test("a gradient with NaN or infinite entries is flagged and stepped around, not written into the iterate", () => {
  // sqrt at 0: an infinite derivative (and inf * 0 = NaN) in the backward pass.
  const rooted = linearModel((flat) => tf.sqrt(flat));
  const zeros = tf.tidy(() => tf.concat([tf.zeros([4, 4, 4, 1]), tf.slice(x, [4], [N - 4])]));
  const labels = Int32Array.from(
    tf.tidy(() => tf.argMax(rooted.forward(zeros).logits, 1)).dataSync(),
  );
  const warnings: string[] = [];
  for (const norm of ["linf", "l2"] as const) {
    const ev = evaluateRobustness(rooted, zeros, labels, {
      norm,
      eps: [0.05],
      attack: ["fgsm", "pgd", "apgd"],
      steps: 3,
      randomStart: false,
      onWarning: (m) => warnings.push(m),
    });
    for (const a of ["fgsm", "pgd", "apgd"]) {
      const o = ev.results[0].attacks[a]!;
      assert.deepEqual(
        Array.from(o.nonFiniteGradient.subarray(0, 4)),
        [1, 1, 1, 1],
        `${norm} ${a}`,
      );
      assert.ok(o.nonFiniteGradientFraction! >= 4 / N);
    }
    // The four black images have no finite gradient entry: the attacks cannot move them.
    const m = maskingChecks(ev);
    assert.equal(m.gradientUnusable.flag, true);
    assert.match(
      m.gradientUnusable.line,
      /NaN or infinite at inputs the attack left robust \(FGSM at eps 0\.05: [4-9] of 24/,
    );
  }
  assert.ok(
    warnings.some((w) => /NaN or infinite entries/.test(w)),
    warnings.join("\n"),
  );
  // The row checks themselves.
  const g = tf.tensor2d([
    [1, NaN],
    [0, 0],
    [Infinity, 2],
  ]);
  assert.deepEqual(Array.from(nonFiniteGradientRows(g)), [1, 0, 1]);
  const zero = new Uint8Array(3);
  const bad = new Uint8Array(3);
  const fixed = checkGradient(g, zero, bad);
  assert.deepEqual(Array.from(zero), [0, 1, 0]);
  assert.deepEqual(Array.from(bad), [1, 0, 1]);
  assert.deepEqual(Array.from(fixed.dataSync()), [1, 0, 0, 0, 0, 2]);
  fixed.dispose();
  zeros.dispose();
});

test("the range check's radius: the width (l_inf) or the diameter (l_2) of the pixel range", () => {
  const space = imageSpace(plain, x);
  assert.equal(rangeRadius(space, "linf")!.max, 1);
  assert.equal(rangeRadius(space, "l2")!.max, 4);
  assert.match(rangeRadius(space, "linf")!.what, /width 1 of the input range \[0, 1\]/);
});
