import { test } from "node:test";
import assert from "node:assert/strict";
import { sigma } from "../../src/softmax/index.ts";
import {
  envelopePoints,
  sigmaLowerEnvelope,
  sigmaUpperEnvelope,
  ENVELOPE_CURVES,
} from "../../src/report/envelope.ts";
import { mulberry32 } from "../helpers/random.ts";

const TOL = 1e-12;

/**
 * A random row of n entries whose largest entry is exactly p1 (position 0): the rest of the
 * mass 1 - p1 is spread by random weights, capped at p1 (water-filling). Needs n p1 >= 1.
 */
function rowWithTop(p1: number, n: number, rand: () => number, sharpness: number): number[] {
  const rest = Array.from({ length: n - 1 }, () => Math.pow(rand(), sharpness) + 1e-12);
  let mass = 1 - p1;
  const capped = new Array<boolean>(n - 1).fill(false);
  const out = new Array<number>(n - 1).fill(0);
  for (let round = 0; round < n; round++) {
    const free = rest.reduce((s, w, i) => (capped[i] ? s : s + w), 0);
    let overflow = false;
    for (let i = 0; i < n - 1; i++) {
      if (capped[i]) continue;
      out[i] = (mass * rest[i]) / free;
      if (out[i] > p1) overflow = true;
    }
    if (!overflow) break;
    for (let i = 0; i < n - 1; i++)
      if (!capped[i] && out[i] > p1) {
        capped[i] = true;
        out[i] = p1;
        mass -= p1;
      }
  }
  return [p1, ...out];
}

test("no attention row exceeds the upper envelope or falls below p1 (1 - p1), for any n and p1", () => {
  const rand = mulberry32(7);
  let checked = 0;
  for (let k = 0; k < 400; k++) {
    const p1 = 0.02 + 0.98 * rand();
    const minN = Math.ceil(1 / p1 - 1e-9);
    const n = Math.max(2, minN) + Math.floor(rand() * 30);
    for (const sharpness of [0.2, 1, 4, 16]) {
      const row = rowWithTop(p1, n, rand, sharpness);
      const sum = row.reduce((a, b) => a + b, 0);
      assert.ok(Math.abs(sum - 1) < 1e-9, `row sums to ${sum}`);
      assert.ok(Math.max(...row) <= p1 + 1e-12);
      const s = sigma(row);
      assert.ok(
        s <= sigmaUpperEnvelope(p1) + TOL,
        `p1 ${p1}, n ${n}: sigma ${s} > ${sigmaUpperEnvelope(p1)}`,
      );
      assert.ok(
        s >= sigmaLowerEnvelope(p1) - TOL,
        `p1 ${p1}, n ${n}: sigma ${s} < ${sigmaLowerEnvelope(p1)}`,
      );
      checked++;
    }
  }
  // Softmax rows of random logits, whatever their top entry.
  for (let k = 0; k < 2000; k++) {
    const n = 2 + Math.floor(rand() * 60);
    const scale = [0.1, 1, 5, 30][k % 4];
    const z = Array.from({ length: n }, () => scale * (rand() * 2 - 1));
    const m = Math.max(...z);
    const e = z.map((v) => Math.exp(v - m));
    const total = e.reduce((a, b) => a + b, 0);
    const p = e.map((v) => v / total);
    const p1 = Math.max(...p);
    const s = sigma(p);
    assert.ok(
      s <= sigmaUpperEnvelope(p1) + TOL && s >= sigmaLowerEnvelope(p1) - TOL,
      `row of ${n}: p1 ${p1}, sigma ${s}`,
    );
    checked++;
  }
  assert.equal(checked, 400 * 4 + 2000);
});

test("the upper envelope is attained: a tie at the top below 1/2, two atoms above", () => {
  for (const p1 of [0.05, 0.1, 0.25, 1 / 3, 0.4, 0.5]) {
    const n = Math.ceil(1 / p1 - 1e-9) + 3;
    const rest = (1 - 2 * p1) / (n - 2);
    const row = [p1, p1, ...new Array(n - 2).fill(rest)];
    assert.ok(
      Math.abs(sigma(row) - sigmaUpperEnvelope(p1)) < 1e-12,
      `tie row p1 ${p1}: ${sigma(row)}`,
    );
  }
  for (const p1 of [0.5, 0.6, 0.75, 0.9, 0.99]) {
    assert.ok(Math.abs(sigma([p1, 1 - p1]) - 2 * p1 * (1 - p1)) < 1e-12);
    assert.equal(sigmaUpperEnvelope(p1), 2 * p1 * (1 - p1));
  }
  // Continuous at the kink, and the largest value over all rows is 1/2.
  assert.equal(sigmaUpperEnvelope(0.5), 0.5);
  assert.ok(Math.abs(sigmaUpperEnvelope(0.5 + 1e-9) - 0.5) < 1e-8);
});

test("the lower curve p1 (1 - p1) is approached by rows whose rest is spread thin", () => {
  for (const p1 of [0.2, 0.5, 0.8]) {
    const m = 20000;
    const row = [p1, ...new Array(m).fill((1 - p1) / m)];
    const s = sigma(row);
    assert.ok(s >= sigmaLowerEnvelope(p1) - TOL);
    assert.ok(
      s - sigmaLowerEnvelope(p1) < 1e-3,
      `p1 ${p1}: sigma ${s}, lower ${sigmaLowerEnvelope(p1)}`,
    );
  }
});

test("envelopePoints samples both curves on [0, 1] with the kink at 1/2", () => {
  const points = envelopePoints(10);
  const upper = points.filter((p) => p.curve === ENVELOPE_CURVES.upper);
  const lower = points.filter((p) => p.curve === ENVELOPE_CURVES.lower);
  assert.equal(upper.length, 11);
  assert.equal(lower.length, 11);
  assert.ok(upper.some((p) => p.p1 === 0.5 && p.sigma === 0.5));
  for (const p of upper) assert.equal(p.sigma, sigmaUpperEnvelope(p.p1));
  for (let i = 1; i < upper.length; i++) assert.ok(upper[i].p1 > upper[i - 1].p1);
});
