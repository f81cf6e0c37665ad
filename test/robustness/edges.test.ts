import { test } from "node:test";
import assert from "node:assert/strict";
import { tf, useBackend } from "../../src/backend.ts";
import type { TransformerClassifier } from "../../src/nn/model.ts";
import { TextClassifier } from "../../src/nn/textClassifier.ts";
import {
  evaluateTextRobustness,
  fgsmEmbedding,
  pgdEmbedding,
} from "../../src/robustness/embedding.ts";
import { evaluateRobustness } from "../../src/robustness/evaluate.ts";
import { fgsm } from "../../src/robustness/fgsm.ts";
import { zeroGradientRows } from "../../src/robustness/loss.ts";
import { epsLimit, resolveAttackOptions } from "../../src/robustness/options.ts";
import { NO_CLIP } from "../../src/robustness/inputSpace.ts";
import { pgd, pgdWithGradient } from "../../src/robustness/pgd.ts";
import { tinyText } from "../helpers/tinyText.ts";

// Attacks at the edges: the library refuses radii and settings that make no sense for the
// input range (the CLI did, the library did not), and every attack, in either norm, flags the
// inputs whose loss gradient is exactly zero (gradient masking, not robustness).

await useBackend("wasm");

/**
 * A two-class "model" on inputs [b, 2] in [0, 1] whose gradient is exactly zero for some
 * inputs: logits [1, 10 relu(x_0 - 0.5)]. An input with x_0 < 0.5 - eps sits on the dead side
 * of the ReLU: class 0, zero gradient, and no attack that follows the gradient moves it,
 * although x_0 + eps > 0.6 would flip it for eps > 0.1 + (0.5 - x_0). An input with x_0 > 0.5
 * is class 1 with a non-zero gradient.
 */
const deadRelu = {
  config: { classes: 2 },
  forward: (x: tf.Tensor) => ({
    logits: tf.tidy(() => {
      const flat = tf.reshape(x, [x.shape[0] as number, -1]);
      const c1 = tf.mul(tf.relu(tf.sub(tf.slice(flat, [0, 0], [-1, 1]), 0.5)), 10);
      return tf.concat([tf.onesLike(c1), c1], 1);
    }),
  }),
} as unknown as TransformerClassifier;

const X = () =>
  tf.tensor2d([
    [0.2, 0.2], // class 0, zero gradient
    [0.9, 0.9], // class 1, gradient non-zero
    [0.1, 0.5], // class 0, zero gradient
    [0.95, 0.0], // class 1, gradient non-zero
  ]);
const LABELS = [0, 1, 0, 1];

const TINY_TEXT = tinyText({ vocabSize: 50 });

function refuses(call: () => unknown, pattern: RegExp, what: string): void {
  assert.throws(
    call,
    (e: Error) => {
      assert.ok(e instanceof RangeError, `${what}: ${String(e)}`);
      assert.match(e.message, pattern, what);
      return true;
    },
    what,
  );
}

test("every input-space attack refuses an l_inf eps above the input range's width, naming eps and the range", () => {
  const x = X();
  const before = tf.memory().numTensors;
  const zero = (z: tf.Tensor) => tf.zerosLike(z);
  const width = /eps 8 is larger than the width 1 of the input range \[0, 1\].*8\/255/;
  refuses(
    () => fgsm(deadRelu, x, LABELS, { eps: 8 }),
    new RegExp(`^fgsm: ${width.source}`),
    "fgsm",
  );
  refuses(() => pgd(deadRelu, x, LABELS, { eps: 8 }), new RegExp(`^pgd: ${width.source}`), "pgd");
  refuses(
    () => pgdWithGradient(zero, x, { eps: 8 }),
    /^pgd: eps 8 is larger than the width 1/,
    "pgdWithGradient",
  );
  refuses(
    () => evaluateRobustness(deadRelu, x, LABELS, { eps: [0, 0.1, 8] }),
    /^evaluateRobustness: eps 8 is larger than the width 1 of the input range \[0, 1\]/,
    "evaluateRobustness",
  );
  // Another range: its own width.
  const y = tf.tensor2d([[-0.5, 0.5]]);
  refuses(
    () => pgdWithGradient(zero, y, { eps: 2.5, clip: [-1, 1] }),
    /eps 2.5 is larger than the width 2 of the input range \[-1, 1\]/,
    "clip [-1, 1]",
  );
  const ok = pgdWithGradient(zero, y, { eps: 2, clip: [-1, 1], steps: 1, onWarning: () => {} });
  // The whole width is still a radius (the CLI's eps 1 on [0, 1]).
  const full = fgsm(deadRelu, x, LABELS, { eps: 1, onWarning: () => {} });
  tf.dispose([ok, full, y]);
  assert.equal(tf.memory().numTensors, before);
  x.dispose();
});

test("l_2: eps above the range's diameter (width * sqrt(entries)) is refused by every attack", () => {
  const x = X(); // 2 entries per example in [0, 1]: diameter sqrt(2)
  const diameter =
    /eps 1.5 is larger than 1.41421, the l_2 diameter of the input range \[0, 1\] for inputs of 2 entries/;
  refuses(() => fgsm(deadRelu, x, LABELS, { eps: 1.5, norm: "l2" }), diameter, "fgsm");
  refuses(() => pgd(deadRelu, x, LABELS, { eps: 1.5, norm: "l2" }), diameter, "pgd");
  refuses(
    () => evaluateRobustness(deadRelu, x, LABELS, { eps: [1.5], norm: "l2" }),
    diameter,
    "evaluateRobustness",
  );
  const adv = pgd(deadRelu, x, LABELS, { eps: 1.4, norm: "l2", steps: 1, onWarning: () => {} });
  adv.dispose();
  x.dispose();
});

test("negative, NaN, infinite or non-number eps, and non-positive steps or batch sizes: the same error from every attack", () => {
  const x = X();
  const m = new TextClassifier(TINY_TEXT, 1);
  const ids = tf.tensor2d([[2, 5, 6, 0]], [1, 4], "int32");
  const inputs = { ids, mask: tf.tidy(() => tf.cast(tf.notEqual(ids, 0), "float32")) };
  const attacks: [
    string,
    (o: { eps: number; steps?: number; batchSize?: number; stepSize?: number; seed?: number }) => unknown,
  ][] = [
    ["fgsm", (o) => fgsm(deadRelu, x, LABELS, o)],
    ["pgd", (o) => pgd(deadRelu, x, LABELS, o)],
    ["evaluateRobustness", (o) => evaluateRobustness(deadRelu, x, LABELS, { ...o, eps: [o.eps] })],
    ["fgsmEmbedding", (o) => fgsmEmbedding(m, inputs, [1], o)],
    ["pgdEmbedding", (o) => pgdEmbedding(m, inputs, [1], o)],
    [
      "evaluateTextRobustness",
      (o) => evaluateTextRobustness(m, inputs, [1], { ...o, eps: [o.eps] }),
    ],
  ];
  for (const [who, run] of attacks) {
    for (const eps of [-0.1, NaN, Infinity])
      refuses(
        () => run({ eps }),
        new RegExp(`^${who}: eps must be a finite number >= 0, got ${String(eps)}$`),
        `${who} eps ${eps}`,
      );
    // A string prints like a valid radius: the message says it is one.
    refuses(
      () => run({ eps: "0.1" as unknown as number }),
      new RegExp(`^${who}: eps must be a number, got the string "0\\.1"$`),
      `${who} eps "0.1"`,
    );
    if (who.startsWith("fgsm")) continue;
    // As the CLI refuses --step-size 0 and --seed -1: a step of 0 never moves, a seed is an
    // integer in [0, 2^32).
    refuses(
      () => run({ eps: 0.1, stepSize: 0 }),
      new RegExp(`^${who}: stepSize must be a finite number > 0, got 0$`),
      `${who} stepSize 0`,
    );
    for (const seed of [-1, 0.5, 2 ** 32])
      refuses(
        () => run({ eps: 0.1, seed }),
        new RegExp(`^${who}: seed must be an integer from 0 to 4294967295, got ${seed}$`),
        `${who} seed ${seed}`,
      );
    for (const steps of [0, -3, 1.5, NaN])
      refuses(
        () => run({ eps: 0.1, steps }),
        new RegExp(`^${who}: steps must be an integer >= 1, got ${steps}$`),
        `${who} steps ${steps}`,
      );
    if (who.startsWith("evaluate"))
      refuses(
        () => run({ eps: 0.1, batchSize: 0 }),
        new RegExp(`^${who}: batchSize must be an integer >= 1, got 0$`),
        `${who} batchSize`,
      );
  }
  // The embedding space has no valid range: a large radius is no error there.
  const big = fgsmEmbedding(m, inputs, [1], { eps: 8, onWarning: () => {} });
  tf.dispose([big, ids, inputs.mask, x]);
  m.dispose();
});

test("zeroGradientRows flags the examples whose every gradient entry is exactly 0", () => {
  const g = tf.tensor3d([[[0, 0]], [[0, 1e-30]], [[-0, 0]], [[NaN, 0]]]);
  assert.deepEqual(Array.from(zeroGradientRows(g)), [1, 0, 1, 0]);
  g.dispose();
});

for (const norm of ["linf", "l2"] as const) {
  test(`${norm}: FGSM and PGD flag the inputs with an all-zero gradient and warn once`, () => {
    const x = X();
    const before = tf.memory().numTensors;
    for (const [who, attack] of [
      ["fgsm", (o: object) => fgsm(deadRelu, x, LABELS, { eps: 0.3, norm, ...o })],
      ["pgd", (o: object) => pgd(deadRelu, x, LABELS, { eps: 0.3, norm, steps: 3, seed: 1, ...o })],
    ] as const) {
      const warnings: string[] = [];
      const flags: number[][] = [];
      const adv = attack({
        onWarning: (m: string) => warnings.push(m),
        onZeroGradient: (z: Uint8Array) => flags.push(Array.from(z)),
      });
      assert.deepEqual(flags, [[1, 0, 1, 0]], who);
      assert.equal(warnings.length, 1, who);
      assert.match(
        warnings[0],
        new RegExp(
          `^${who}: the loss gradient is exactly zero for 2 example\\(s\\) of 4 \\(${norm}, .*gradient masking`,
        ),
      );
      // Those inputs did not move (FGSM) and are still "robust": the masking the flag reports.
      const a = adv.arraySync() as number[][];
      if (who === "fgsm")
        assert.deepEqual(
          [a[0], a[2]],
          [
            [0.2, 0.2],
            [0.1, 0.5],
          ].map((r) => r.map(Math.fround)),
        );
      adv.dispose();
    }
    assert.equal(tf.memory().numTensors, before);
    x.dispose();
  });

  test(`${norm}: evaluateRobustness reports the zero-gradient fraction per attack and eps (null at eps 0)`, () => {
    const x = X();
    const warnings: string[] = [];
    const r = evaluateRobustness(deadRelu, x, LABELS, {
      eps: [0, 0.3],
      norm,
      steps: 3,
      batchSize: 3,
      onWarning: (m) => warnings.push(m),
    });
    assert.equal(r.cleanAccuracy, 1);
    for (const a of ["fgsm", "pgd"] as const) {
      assert.equal(r.results[0].attacks[a]!.zeroGradientFraction, null, `${a} eps 0`);
      assert.deepEqual(Array.from(r.results[0].attacks[a]!.zeroGradient), [0, 0, 0, 0]);
      assert.equal(r.results[1].attacks[a]!.zeroGradientFraction, 0.5, `${a} eps 0.3`);
      assert.deepEqual(
        Array.from(r.results[1].attacks[a]!.zeroGradient),
        [1, 0, 1, 0],
        `${a} flags across batches`,
      );
    }
    assert.equal(warnings.length, 1, "one warning per evaluation");
    x.dispose();
  });
}

test("pgdWithGradient flags an l_inf zero gradient met at any step (it only warned for l_2)", () => {
  const x = tf.tensor2d([
    [0.2, 0.7],
    [0.4, 0.1],
  ]);
  let calls = 0;
  // Row 1's gradient vanishes from the second step on; row 0's never does.
  const gradient = (z: tf.Tensor) =>
    tf.tidy(() => tf.mul(tf.onesLike(z), tf.tensor2d([[1], [calls++ === 0 ? 1 : 0]])));
  const flags: number[][] = [];
  const warnings: string[] = [];
  const adv = pgdWithGradient(gradient, x, {
    eps: 0.1,
    steps: 3,
    randomStart: false,
    onWarning: (m) => warnings.push(m),
    onZeroGradient: (z) => flags.push(Array.from(z)),
  });
  assert.deepEqual(flags, [[0, 1]]);
  assert.match(
    warnings[0],
    /^pgd: the loss gradient is exactly zero for 1 example\(s\) of 2 \(linf, at one or more of its 3 steps\)/,
  );
  tf.dispose([adv, x]);
});

test("resolveAttackOptions, the library's one check: step size 0, seed -1 and strings are refused by name", () => {
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ eps: 0.1, stepSize: 0 }, /^me: stepSize must be a finite number > 0, got 0$/],
    [{ eps: 0.1, stepSize: "0.01" }, /^me: stepSize must be a number, got the string "0\.01"$/],
    [{ eps: 0.1, seed: -1 }, /^me: seed must be an integer from 0 to 4294967295, got -1$/],
    [{ eps: 0.1, seed: "1" }, /^me: seed must be a number, got the string "1"$/],
    [{ eps: 0.1, steps: "10" }, /^me: steps must be a number, got the string "10"$/],
    [{ eps: "0.1" }, /^me: eps must be a number, got the string "0\.1"$/],
    [{ eps: null }, /^me: eps must be a number, got null$/],
  ];
  for (const [options, pattern] of cases)
    refuses(() => resolveAttackOptions(options as never, "me"), pattern, JSON.stringify(options));
  // Left out or null, the step size follows the rule 2.5 * eps / steps (0 at eps 0: nothing moves).
  assert.equal(resolveAttackOptions({ eps: 0.1, stepSize: null }, "me").stepSize, 0.025);
  assert.equal(resolveAttackOptions({ eps: 0 }, "me").stepSize, 0);
  assert.equal(resolveAttackOptions({ eps: 0.1, seed: 2 ** 32 - 1 }, "me").seed, 2 ** 32 - 1);
});

test("the eps limit comes from the input space: the pixel range and the image size, none for embeddings", () => {
  assert.deepEqual(epsLimit("linf", [0, 1], 784)?.max, 1);
  assert.equal(epsLimit("l2", [0, 1], 28 * 28)?.max, 28);
  assert.equal(epsLimit("l2", [0, 1], 32 * 32 * 3)?.max, Math.sqrt(32 * 32 * 3)); // CIFAR-10: 55.4
  assert.equal(epsLimit("linf", [0, 255], 784)?.max, 255);
  assert.equal(epsLimit("l2", [0, 255], 4)?.max, 510);
  assert.equal(epsLimit("l2", [0, 1]), null, "no shape: no l_2 limit");
  assert.equal(epsLimit("linf", NO_CLIP, 784), null, "embeddings are not clipped");
  assert.equal(epsLimit("l2", NO_CLIP, 784), null);
  // CIFAR-sized inputs take an l_2 radius above MNIST's 28 and refuse one above sqrt(3072).
  assert.equal(resolveAttackOptions({ eps: 50, norm: "l2" }, "me", [1, 32, 32, 3]).eps, 50);
  refuses(
    () => resolveAttackOptions({ eps: 56, norm: "l2" }, "me", [1, 32, 32, 3]),
    /^me: eps 56 is larger than 55\.4256, the l_2 diameter of the input range \[0, 1\] for inputs of 3072 entries/,
    "cifar l2",
  );
  // Embedding space: no upper limit in either norm.
  assert.equal(resolveAttackOptions({ eps: 8, clip: NO_CLIP }, "me").eps, 8);
  assert.equal(resolveAttackOptions({ eps: 1e6, norm: "l2", clip: NO_CLIP }, "me", [1, 8, 16]).eps, 1e6);
});
