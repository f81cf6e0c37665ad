import { test } from "node:test";
import assert from "node:assert/strict";
import { referenceBounds, sigma, sigmaQuad, sigmaTop2 } from "../../src/softmax/index.ts";
import { denseSigma } from "../helpers/denseSigma.ts";

// docs/math.md section 1, reference values (float64).
const table: [number[], number, number, number][] = [
  [[0.7, 0.3], 0.42, 0.42, 0.42],
  [[0.4, 0.4, 0.2], 0.4, 0.4, 0.4],
  [[0.5, 0.3, 0.2], 0.388102496759067, 0.394661853126194, 0.4],
  [[0.6, 0.2, 0.1, 0.1], 0.337979589711327, 0.3452417469626, 0.36],
  [[0.8, 0.15, 0.05], 0.267780855600658, 0.270195927891221, 0.28],
  [[0.97, 0.01, 0.01, 0.01], 0.0388, 0.0388, 0.0388],
  [[0.25, 0.25, 0.25, 0.25], 0.25, 0.25, 0.25],
  [[1, 0, 0], 0, 0, 0],
];

const close = (actual: number, expected: number, tol: number, what: string) =>
  assert.ok(Math.abs(actual - expected) <= tol, `${what}: got ${actual}, expected ${expected}`);

test("docs/math.md reference table to 1e-12", () => {
  for (const [p, s, q, t] of table) {
    close(sigma(p), s, 1e-12, `sigma(${p})`);
    close(sigmaQuad(p), q, 1e-12, `sigmaQuad(${p})`);
    close(sigmaTop2(p), t, 1e-12, `sigmaTop2(${p})`);
    close(denseSigma(p), s, 1e-12, `dense oracle(${p})`);
  }
});

test("exact special cases: n = 1, one-hot, uniform, ties, two atoms, zeros drop out", () => {
  assert.equal(sigma([1]), 0);
  assert.equal(sigma([]), 0);
  assert.equal(sigma([0, 1, 0, 0]), 0);
  assert.equal(sigma([0, 0, 0]), 0);
  for (const n of [2, 3, 7, 50, 300]) close(sigma(new Array(n).fill(1 / n)), 1 / n, 1e-15, `uniform ${n}`);
  assert.equal(sigma([0.3, 0.3, 0.2, 0.2]), 0.3);
  assert.equal(sigma([0.1, 0.45, 0.45]), 0.45);
  for (const a of [0.5, 0.6, 0.9, 0.999]) close(sigma([a, 1 - a]), 2 * a * (1 - a), 1e-15, `two atoms ${a}`);
  close(sigma([0.5, 0, 0.3, 0, 0.2]), sigma([0.5, 0.3, 0.2]), 1e-16, "zeros drop out");
});

test("interlacing and the other classical bounds hold on the table", () => {
  for (const [p] of table) {
    const s = sigma(p);
    const b = referenceBounds(p);
    const sorted = [...p].sort((x, y) => y - x);
    assert.ok(s <= sorted[0] + 1e-15 && s >= (sorted[1] ?? 0) - 1e-15, `interlacing ${p}`);
    for (const [name, value] of Object.entries(b)) assert.ok(s <= value + 1e-15, `${name} below sigma on ${p}`);
  }
  assert.deepEqual(referenceBounds([0.5, 0.3, 0.2]), { top1: 0.5, gershgorin: 0.5, trace: 0.62, half: 0.5, one: 1 });
});

test("near one-hot rows keep relative precision (p_(1) = 1 - 1e-9 and 1 - 1e-14)", () => {
  for (const gap of [1e-9, 1e-14]) {
    for (const rest of [[1], [0.5, 0.5], [0.7, 0.2, 0.1], [0.25, 0.25, 0.25, 0.25], [0.9, 0.05, 0.03, 0.02]]) {
      const p = [1 - gap, ...rest.map((w) => w * gap)];
      const expected = denseSigma(p);
      const got = sigma(p);
      assert.ok(Math.abs(got - expected) <= 1e-6 * expected, `gap ${gap} rest ${rest}: ${got} vs ${expected}`);
      assert.ok(sigmaQuad(p) >= got * (1 - 1e-12) && sigmaTop2(p) >= sigmaQuad(p) * (1 - 1e-12));
      // sigma ~ 2 (1 - p_(1)) near one-hot, within a factor that the other entries set.
      assert.ok(got > 0.9 * gap && got < 2.01 * gap, `scale ${got} for gap ${gap}`);
    }
  }
});

test("rows with tiny other entries (squares underflow) keep full relative precision", () => {
  // Found by a newcomer: sigma used to stick near 2^-100 for these rows.
  const cases: [number[], number][] = [
    [[1, 1e-300], 2e-300],
    [[1, 1e-200], 2e-200],
    [[1, 1e-160], 2e-160],
  ];
  for (const [p, expected] of cases) {
    for (const f of [sigma, sigmaQuad, sigmaTop2]) {
      const got = f(p);
      assert.ok(Math.abs(got - expected) <= 1e-12 * expected, `${f.name}(${p}) = ${got}, expected ${expected}`);
    }
  }
  // Three entries, other than two atoms: compare with the same row scaled into the normal range
  // through the closed form, which is exact when all other entries are equal.
  const three = [3.203908980423388e-36, 1.7438425510434147e-44, 1];
  const s = sigma(three);
  assert.ok(s <= sigmaQuad(three) && sigmaQuad(three) <= sigmaTop2(three), `chain broken: ${s}`);
  assert.ok(s > 6.4e-36 && s < 6.41e-36, `sigma ${s}`);
  const mixed = [8.265186284699431e-30, 0, 1.401298464324817e-45, 0, 0, 1];
  assert.ok(sigma(mixed) <= sigmaQuad(mixed) && sigma(mixed) >= 1.6e-29);
});

test("rounding never breaks sigma <= sigmaQuad <= sigmaTop2, also on long uniform rows and ties", () => {
  for (const p of [new Array(10000).fill(1e-4), [0.45, 0.45, 0.05, 0.05], [0.5, 0.5000001]]) {
    assert.ok(sigma(p) <= sigmaQuad(p) && sigmaQuad(p) <= sigmaTop2(p), `row of length ${p.length}`);
  }
});

test("1 - p_(1) is the sum of the other entries, as README says: sigma 0.9999995,1e-7 uses 1e-7", () => {
  const p = [0.9999995, 1e-7];
  // p_(1) (r + p_(2)) with r = 1e-7 (the other entries), not 1 - p_(1) = 5e-7.
  assert.ok(Math.abs(sigmaTop2(p) - 0.9999995 * 2e-7) <= 1e-15 * 2e-7);
  assert.ok(Math.abs(referenceBounds(p).trace - 2 * 0.9999995 * 1e-7) <= 1e-15 * 2e-7);
});
