import { test } from "node:test";
import assert from "node:assert/strict";
import { tf, useBackend } from "../../src/backend.ts";
import {
  pgdStartL2,
  pgdStartLinf,
  pgdStepL2,
  pgdStepLinf,
  projectL2,
  signOf,
} from "../../src/robustness/steps.ts";
import { pgdWithGradient } from "../../src/robustness/pgd.ts";
import { randomOffsetL2, randomOffsetLinf } from "../../src/robustness/random.ts";

await useBackend("wasm");

const close = (actual: ArrayLike<number>, expected: number[], tol = 1e-6, what = "") => {
  assert.equal(actual.length, expected.length, what);
  for (let i = 0; i < expected.length; i++)
    assert.ok(
      Math.abs(actual[i] - expected[i]) <= tol,
      `${what}[${i}]: ${actual[i]} vs ${expected[i]}`,
    );
};

test("the l_inf random start is clipped to [0, 1] before the first gradient", () => {
  const x = tf.tensor2d([[0.0, 0.5, 1.0]]);
  const offset = tf.tensor2d([[-0.1, 0.05, 0.1]]);
  const start = pgdStartLinf(x, offset, 0.1);
  close(start.dataSync(), [0.0, 0.55, 1.0], 1e-7, "start");
  // The PGD loop evaluates its first gradient exactly there.
  const seen: number[][] = [];
  const adv = pgdWithGradient(
    (z) => {
      seen.push(Array.from(z.dataSync()));
      return tf.zerosLike(z);
    },
    x,
    { norm: "linf", eps: 0.1, steps: 1, start: offset, onWarning: () => {} }, // zero gradient: flagged
  );
  assert.equal(seen.length, 1);
  close(seen[0], [0.0, 0.55, 1.0], 1e-7, "first gradient point");
  // The same holds for l_2: the start is clipped before the first gradient.
  const seen2: number[][] = [];
  const adv2 = pgdWithGradient(
    (z) => {
      seen2.push(Array.from(z.dataSync()));
      return tf.onesLike(z);
    },
    x,
    { norm: "l2", eps: 0.2, steps: 1, start: offset, stepSize: 1e-3 }, // a step size must be > 0
  );
  close(seen2[0], [0.0, 0.55, 1.0], 1e-7, "l2 first gradient point");
  tf.dispose([x, offset, start, adv, adv2]);
});

test("a step that would leave [0, 1] is clipped", () => {
  const x = tf.tensor2d([[0.98, 0.02]]);
  const grad = tf.tensor2d([[3.5, -0.2]]); // sign [+1, -1]
  const next = pgdStepLinf(x, x, grad, 0.05, 0.05);
  close(next.dataSync(), [1.0, 0.0], 0, "l_inf step");
  // l_2: the same direction leaves the box too and is clipped.
  const next2 = pgdStepL2(x, x, tf.tensor2d([[1, -1]]), 0.05, 0.05);
  const v = next2.dataSync();
  assert.ok(v[0] <= 1 && v[1] >= 0, `l2 step clipped: ${Array.from(v)}`);
  close(v, [1.0, 0.0], 0, "l2 step (0.02 - 0.05 / sqrt 2 < 0 is clipped to 0)");
  tf.dispose([x, grad, next, next2]);
});

test("the l_inf step is projected onto the eps ball around the clean input", () => {
  const x0 = tf.tensor2d([[0.5, 0.5, 0.5]]);
  const x = tf.tensor2d([[0.53, 0.47, 0.5]]);
  const grad = tf.tensor2d([[1, -1, 0]]);
  const next = pgdStepLinf(x, x0, grad, 0.05, 0.04);
  close(next.dataSync(), [0.55, 0.45, 0.5], 1e-6, "projected; zero gradient entry stays");
  tf.dispose([x0, x, grad, next]);
});

test("the l_inf step moves along every non-zero gradient entry, however small (wasm's Sign zeroes those below 1.2e-7)", () => {
  const g = tf.tensor2d([[1e-9, -1e-12, 0, 3e-30, -2, 1.1e-7]]);
  assert.deepEqual(Array.from(tf.tidy(() => signOf(g)).dataSync()), [1, -1, 0, 1, -1, 1]);
  const x = tf.fill([1, 6], 0.5);
  const next = pgdStepLinf(x, x, g, 0.1, 0.05);
  close(next.dataSync(), [0.55, 0.45, 0.5, 0.55, 0.45, 0.55], 1e-7, "step");
  tf.dispose([g, x, next]);
});

test("the l_2 step follows the normalised gradient and is projected onto the ball", () => {
  const x0 = tf.tensor2d([
    [0.5, 0.5],
    [0.5, 0.5],
  ]);
  const grad = tf.tensor2d([
    [3, 4],
    [-30, 40],
  ]);
  const free = pgdStepL2(x0, x0, grad, 1, 0.1);
  close(free.dataSync(), [0.56, 0.58, 0.44, 0.58], 1e-6, "unit step 0.1");
  const projected = pgdStepL2(x0, x0, grad, 0.05, 0.1);
  close(projected.dataSync(), [0.53, 0.54, 0.47, 0.54], 1e-6, "projected to radius 0.05");
  const p = projectL2(tf.tensor2d([[0.5, 0.5]]), tf.tensor2d([[0.5, 0.5]]), 0);
  close(p.dataSync(), [0.5, 0.5], 0, "zero delta, zero radius: no NaN");
  tf.dispose([x0, grad, free, projected, p]);
});

test("an l_2 step with an exactly zero gradient leaves the input unchanged, warns once, and gives no NaN", (t) => {
  const x = tf.tensor2d([
    [0.2, 0.7, 1.0],
    [0.4, 0.0, 0.9],
  ]);
  const grad = tf.tensor2d([
    [0, 0, 0],
    [1e-30, 0, 0],
  ]); // row 0 exactly zero, row 1 tiny but not zero
  const counts: number[] = [];
  const next = pgdStepL2(x, x, grad, 0.5, 0.1, [0, 1], (c) => counts.push(c));
  const v = next.dataSync();
  assert.ok(v.every(Number.isFinite), "no NaN");
  close(
    v.subarray(0, 3),
    Array.from(x.dataSync().subarray(0, 3)),
    0,
    "zero-gradient row unchanged",
  );
  close(v.subarray(3), [0.5, 0.0, 0.9], 1e-6, "tiny gradient still gives a full unit step");
  assert.deepEqual(counts, [1]);

  // Inside PGD: several steps, one warning per call (here through console.warn, the default).
  const warn = t.mock.method(console, "warn", () => {});
  const before = tf.memory().numTensors;
  const adv = pgdWithGradient((z) => tf.zerosLike(z), x, {
    norm: "l2",
    eps: 0.5,
    steps: 5,
    randomStart: false,
  });
  close(adv.dataSync(), Array.from(x.dataSync()), 0, "unchanged after 5 steps");
  assert.equal(warn.mock.callCount(), 1);
  assert.match(String(warn.mock.calls[0].arguments[0]), /gradient is exactly zero for 2 example/);
  adv.dispose();
  assert.equal(tf.memory().numTensors, before);
  tf.dispose([x, grad, next]);
});

test("random offsets: inside the ball, seeded, l_2 radius uniform in the ball", () => {
  const before = tf.memory().numTensors;
  const a = randomOffsetLinf([4, 28, 28, 1], 0.1, 7);
  const b = randomOffsetLinf([4, 28, 28, 1], 0.1, 7);
  const c = randomOffsetLinf([4, 28, 28, 1], 0.1, 8);
  const av = a.dataSync();
  assert.ok(
    av.every((v) => Math.abs(v) <= 0.1),
    "linf offsets in the box",
  );
  assert.deepEqual(av, b.dataSync(), "same seed, same offsets");
  assert.notDeepEqual(av, c.dataSync());
  const l2t = randomOffsetL2([64, 784], 1.5, 3);
  const l2 = l2t.dataSync();
  let sumRadius = 0;
  for (let e = 0; e < 64; e++) {
    let s = 0;
    for (let i = 0; i < 784; i++) s += l2[e * 784 + i] ** 2;
    const r = Math.sqrt(s);
    assert.ok(r <= 1.5, `l2 offset ${e} has norm ${r}`);
    sumRadius += r;
  }
  // Uniform in the ball: E[radius] = eps * D / (D + 1).
  assert.ok(Math.abs(sumRadius / 64 - (1.5 * 784) / 785) < 0.01, `mean radius ${sumRadius / 64}`);
  const zt = randomOffsetL2([2, 3], 0, 1);
  assert.ok(
    zt.dataSync().every((v) => v === 0),
    "eps 0 gives zero offsets",
  );
  assert.throws(() => randomOffsetLinf([4], 0.1, 0), RangeError);
  assert.throws(() => randomOffsetL2([4, 3], -1, 0), RangeError);
  tf.dispose([a, b, c, l2t, zt]);
  assert.equal(tf.memory().numTensors, before);
});

test("pgdStartL2 projects an oversized offset onto the ball, then clips", () => {
  const x = tf.tensor2d([[0.5, 0.5]]);
  const offset = tf.tensor2d([[0.3, 0.4]]); // norm 0.5
  const s = pgdStartL2(x, offset, 0.1);
  close(s.dataSync(), [0.56, 0.58], 1e-6);
  const s2 = pgdStartL2(tf.tensor2d([[0.95, 0.5]]), offset, 0.5);
  close(s2.dataSync(), [1.0, 0.9], 1e-6);
  tf.dispose([x, offset, s, s2]);
});
