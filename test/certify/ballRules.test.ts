// The over-the-ball rules of docs/math.md section 7, each against what it claims: sampled points
// of the ball (and the points where a rule is tight) never exceed it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Matrix, SingularValueDecomposition } from "ml-matrix";
import {
  activationDerivativeBound,
  gershgorinMax,
  layerNormBallFactor,
  probabilityBox,
  scoreHalfWidth,
  sigmaBoxMax,
  tanhDerivativeBound,
} from "../../src/certify/ballRules.ts";
import {
  geluErfDerivative,
  GELU_DERIVATIVE_MAX,
  GELU_ERF_DERIVATIVE_MAX,
} from "../../src/nn/gelu.ts";
import { denseSigma } from "../helpers/denseSigma.ts";
import { gaussian, mulberry32 } from "../helpers/random.ts";
import { layerNormJacobian64 } from "../lipschitz/denseBlock64.ts";

type Rand = () => number;

function softmax(s: ArrayLike<number>): Float64Array {
  const max = Math.max(...Array.from(s));
  const e = Float64Array.from(s, (v) => Math.exp(v - max));
  const z = e.reduce((a, b) => a + b, 0);
  return e.map((v) => v / z);
}

/** A random score box: centres N(0, scale^2), half-widths up to `width`. */
function scoreBox(rand: Rand, m: number, scale: number, width: number) {
  const c = Float64Array.from({ length: m }, () => scale * gaussian(rand));
  const w = Float64Array.from({ length: m }, () => width * rand());
  return { lo: c.map((v, j) => v - w[j]), hi: c.map((v, j) => v + w[j]) };
}

function boxOf(lo: Float64Array, hi: Float64Array) {
  const m = lo.length;
  const pLo = new Float64Array(m);
  const pHi = new Float64Array(m);
  probabilityBox(lo, hi, pLo, pHi, m, new Float64Array(2 * m + 1));
  return { pLo, pHi };
}

function norm2(m: Matrix): number {
  return new SingularValueDecomposition(m, { autoTranspose: true }).norm2;
}

test("the probability box holds the softmax of every score vector in the score box, and its ends are reached", () => {
  const rand = mulberry32(1);
  for (let t = 0; t < 300; t++) {
    const m = 1 + Math.floor(rand() * 8);
    const { lo, hi } = scoreBox(rand, m, [0.1, 3, 30][t % 3], [0, 0.5, 5][Math.floor(t / 3) % 3]);
    const { pLo, pHi } = boxOf(lo, hi);
    for (let k = 0; k < 30; k++) {
      const s = lo.map((v, j) => v + rand() * (hi[j] - v));
      const p = softmax(s);
      for (let j = 0; j < m; j++) {
        assert.ok(p[j] <= pHi[j] * (1 + 1e-12) + 1e-300, `p ${p[j]} above ${pHi[j]}`);
        assert.ok(p[j] >= pLo[j] * (1 - 1e-12), `p ${p[j]} below ${pLo[j]}`);
      }
    }
    // p_j is largest with s_j at its top and the others at their bottoms, and the reverse.
    for (let j = 0; j < m; j++) {
      const up = softmax(lo.map((v, l) => (l === j ? hi[l] : v)))[j];
      const down = softmax(hi.map((v, l) => (l === j ? lo[l] : v)))[j];
      assert.ok(
        Math.abs(up - pHi[j]) <= 1e-12 * Math.max(up, 1e-300) + 1e-300,
        `upper end ${pHi[j]} vs ${up}`,
      );
      assert.ok(
        Math.abs(down - pLo[j]) <= 1e-12 * Math.max(down, 1e-300) + 1e-300,
        `lower end ${pLo[j]} vs ${down}`,
      );
    }
  }
});

test("the probability box stays finite and ordered for scores far apart (no overflow, no 0/0)", () => {
  const { pLo, pHi } = boxOf(Float64Array.from([-800, 0, 900]), Float64Array.from([-790, 10, 905]));
  for (let j = 0; j < 3; j++) {
    assert.ok(Number.isFinite(pLo[j]) && Number.isFinite(pHi[j]));
    assert.ok(pLo[j] <= pHi[j]);
  }
  assert.equal(pHi[2], 1);
});

test("sigma over a probability box is at least the exact sigma of every distribution in it, and at most 1/2", () => {
  const rand = mulberry32(2);
  for (let t = 0; t < 400; t++) {
    const m = 2 + Math.floor(rand() * 7);
    const { lo, hi } = scoreBox(rand, m, [0.3, 2, 6][t % 3], [0, 0.2, 1.5][Math.floor(t / 3) % 3]);
    const { pLo, pHi } = boxOf(lo, hi);
    const bound = sigmaBoxMax(pLo, pHi, m);
    assert.ok(bound <= 0.5 && bound >= 0);
    for (let k = 0; k < 20; k++) {
      const p = softmax(lo.map((v, j) => v + rand() * (hi[j] - v)));
      const sigma = denseSigma(p);
      assert.ok(sigma <= bound + 1e-12, `sigma ${sigma} above the box bound ${bound}`);
    }
  }
});

test("at a single distribution the box bound is at most sigma_top2 = p1 (1 - p1 + p2), and equals sigma on two atoms", () => {
  const rand = mulberry32(3);
  for (let t = 0; t < 100; t++) {
    const m = 2 + Math.floor(rand() * 6);
    const p = softmax(Float64Array.from({ length: m }, () => 3 * gaussian(rand)));
    const sorted = [...p].sort((a, b) => b - a);
    const top2 = sorted[0] * (1 - sorted[0] + sorted[1]);
    const bound = sigmaBoxMax(p, p, m);
    assert.ok(bound <= top2 + 1e-15 && bound >= denseSigma(p) - 1e-12);
  }
  assert.ok(Math.abs(sigmaBoxMax([0.7, 0.3], [0.7, 0.3], 2) - 0.42) < 1e-15);
  assert.equal(sigmaBoxMax([1], [1], 1), 0);
});

test("Gershgorin's 2p(1-p) is maximised over an interval where the interval says", () => {
  const rand = mulberry32(4);
  for (let t = 0; t < 200; t++) {
    const a = rand();
    const b = a + rand() * (1 - a);
    let best = 0;
    for (let k = 0; k <= 1000; k++) {
      const p = a + ((b - a) * k) / 1000;
      best = Math.max(best, 2 * p * (1 - p));
    }
    const g = gershgorinMax(a, b);
    assert.ok(g >= best - 1e-15 && g <= best + 1e-6, `${g} vs grid ${best}`);
  }
});

test("the score half-width holds for every move of the tokens in the Frobenius ball, and its linear term is reached", () => {
  const rand = mulberry32(5);
  for (let t = 0; t < 40; t++) {
    const n = 2 + Math.floor(rand() * 4);
    const d = 2 + Math.floor(rand() * 4);
    const dk = 1 + Math.floor(rand() * 3);
    const W = () =>
      Matrix.from1DArray(
        d,
        dk,
        Float64Array.from({ length: d * dk }, () => gaussian(rand)),
      );
    const wq = W();
    const wk = W();
    const bq = Matrix.from1DArray(
      1,
      dk,
      Float64Array.from({ length: dk }, () => gaussian(rand)),
    );
    const bk = Matrix.from1DArray(
      1,
      dk,
      Float64Array.from({ length: dk }, () => gaussian(rand)),
    );
    const X = Matrix.from1DArray(
      n,
      d,
      Float64Array.from({ length: n * d }, () => 2 * gaussian(rand)),
    );
    const scores = (Y: Matrix) => {
      const Q = Y.mmul(wq).addRowVector(bq.getRow(0));
      const K = Y.mmul(wk).addRowVector(bk.getRow(0));
      return Q.mmul(K.transpose()).div(Math.sqrt(dk));
    };
    const S0 = scores(X);
    const Q0 = X.mmul(wq).addRowVector(bq.getRow(0));
    const K0 = X.mmul(wk).addRowVector(bk.getRow(0));
    const a = (j: number) => norm2(wq.mmul(K0.getRowVector(j).transpose()));
    const b = (i: number) => norm2(wk.mmul(Q0.getRowVector(i).transpose()));
    const mNorm = norm2(wq.mmul(wk.transpose()));
    const r = [0.01, 0.3, 3][t % 3];
    for (let k = 0; k < 60; k++) {
      // A move concentrated on one or two tokens, or spread over all, of norm at most r.
      const D = Matrix.zeros(n, d);
      const rows =
        k % 3 === 0 ? [Math.floor(rand() * n)] : k % 3 === 1 ? [0, 1] : [...Array(n).keys()];
      for (const row of rows) for (let c = 0; c < d; c++) D.set(row, c, gaussian(rand));
      D.mul((r * Math.sqrt(rand())) / D.norm("frobenius"));
      const S = scores(X.clone().add(D));
      for (let i = 0; i < n; i++)
        for (let j = 0; j < n; j++) {
          const w = scoreHalfWidth(i === j ? a(i) : a(j), b(i), mNorm, r, i === j, dk);
          assert.ok(
            Math.abs(S.get(i, j) - S0.get(i, j)) <= w * (1 + 1e-12),
            `score ${i},${j} moved past ${w}`,
          );
        }
    }
    // Moving token j alone along W_Q k_j (score i != j is linear in it): |ds| = a_j r / sqrt(dk) + ...
    const i = 0;
    const j = 1;
    const dir = wq.mmul(K0.getRowVector(j).transpose()).transpose();
    const D = Matrix.zeros(n, d);
    D.setRow(
      i,
      dir
        .div(dir.norm("frobenius") || 1)
        .mul(r)
        .getRow(0),
    );
    const moved = Math.abs(scores(X.clone().add(D)).get(i, j) - S0.get(i, j));
    assert.ok(
      moved >= (a(j) * r) / Math.sqrt(dk) - 1e-9 * (1 + moved),
      "the linear term is reached",
    );
  }
});

test("the score half-width's quadratic term is reached where the linear ones vanish (centre 0, no biases)", () => {
  const rand = mulberry32(9);
  for (let t = 0; t < 20; t++) {
    const d = 2 + Math.floor(rand() * 4);
    const dk = 1 + Math.floor(rand() * 3);
    const wq = Matrix.from1DArray(
      d,
      dk,
      Float64Array.from({ length: d * dk }, () => gaussian(rand)),
    );
    // W_K = W_Q for the diagonal case (M symmetric, positive semidefinite), independent otherwise.
    const wk =
      t % 2 === 0
        ? wq.clone()
        : Matrix.from1DArray(
            d,
            dk,
            Float64Array.from({ length: d * dk }, () => gaussian(rand)),
          );
    const M = wq.mmul(wk.transpose());
    const svd = new SingularValueDecomposition(M, { autoTranspose: true });
    const u = svd.leftSingularVectors.getColumnVector(0);
    const v = svd.rightSingularVectors.getColumnVector(0);
    const r = 0.1 + rand();
    const score = (x: Matrix, y: Matrix) => x.transpose().mmul(M).mmul(y).get(0, 0) / Math.sqrt(dk);
    // i != j: d_i = r u / sqrt 2, d_j = r v / sqrt 2.
    const off = Math.abs(score(u.clone().mul(r / Math.SQRT2), v.clone().mul(r / Math.SQRT2)));
    const wOff = scoreHalfWidth(0, 0, svd.norm2, r, false, dk);
    assert.ok(
      off <= wOff * (1 + 1e-12) && off >= wOff * (1 - 1e-9),
      `off-diagonal ${off} vs ${wOff}`,
    );
    if (t % 2 === 0) {
      const same = Math.abs(score(u.clone().mul(r), u.clone().mul(r)));
      const wSame = scoreHalfWidth(0, 0, svd.norm2, r, true, dk);
      assert.ok(
        same <= wSame * (1 + 1e-12) && same >= wSame * (1 - 1e-9),
        `diagonal ${same} vs ${wSame}`,
      );
    }
  }
});

test("the LayerNorm factor over the ball bounds every row's Jacobian in it, and the row shrunk to its smallest spread reaches it", () => {
  const rand = mulberry32(6);
  for (let t = 0; t < 60; t++) {
    const d = 3 + Math.floor(rand() * 8);
    const x0 = Float64Array.from({ length: d }, () => [0.05, 1, 10][t % 3] * gaussian(rand));
    const constGamma = t % 2 === 0;
    const gamma = Float64Array.from({ length: d }, () =>
      constGamma ? 1.3 : 1 + 0.5 * gaussian(rand),
    );
    const gMax = Math.max(...gamma.map(Math.abs));
    const eps = [1e-5, 1e-12][t % 2];
    const mean = x0.reduce((s, v) => s + v, 0) / d;
    const centred = x0.map((v) => v - mean);
    const c2 = centred.reduce((s, v) => s + v * v, 0);
    const std0 = Math.sqrt(c2 / d);
    const rho = [0.1, 0.5, 0.9][t % 3] * std0 * Math.sqrt(d) * rand();
    const bound = layerNormBallFactor(std0, rho, d, eps, gMax);
    const J = (x: Float64Array) =>
      norm2(Matrix.from1DArray(d, d, layerNormJacobian64(x, gamma, eps)));
    for (let k = 0; k < 30; k++) {
      const dir = Float64Array.from({ length: d }, () => gaussian(rand));
      const len = Math.hypot(...dir);
      const y = x0.map((v, c) => v + (rho * Math.sqrt(rand()) * dir[c]) / len);
      assert.ok(J(y) <= bound * (1 + 1e-9), `Jacobian ${J(y)} above ${bound}`);
    }
    // Towards the mean by rho: the spread falls by exactly rho / sqrt(d).
    const shrunk = x0.map((v, c) => v - (rho * centred[c]) / Math.sqrt(c2));
    const reached = J(shrunk);
    assert.ok(reached <= bound * (1 + 1e-9));
    if (constGamma)
      assert.ok(reached >= bound * (1 - 1e-6), `the bound ${bound} is reached: ${reached}`);
  }
});

test("the GELU derivative over a pre-activation's range: exact GELU by its sqrt(2/pi) slope, the tanh form by its maximum", () => {
  const rand = mulberry32(7);
  for (let t = 0; t < 300; t++) {
    const h = 4 * gaussian(rand);
    const spread = [1e-6, 0.1, 2][t % 3] * rand();
    const bound = activationDerivativeBound("gelu-erf", Math.abs(geluErfDerivative(h)), spread);
    assert.ok(bound <= GELU_ERF_DERIVATIVE_MAX);
    for (let k = 0; k <= 50; k++) {
      const z = h - spread + (2 * spread * k) / 50;
      assert.ok(Math.abs(geluErfDerivative(z)) <= bound + 1e-15);
    }
  }
  assert.equal(activationDerivativeBound("gelu-tanh", 0.1, 0), GELU_DERIVATIVE_MAX);
  assert.equal(activationDerivativeBound("gelu-erf", 1.1, 10), GELU_ERF_DERIVATIVE_MAX);
});

test("tanh' over an interval is largest at the end nearer 0, and 1 when the interval holds 0", () => {
  const rand = mulberry32(8);
  for (let t = 0; t < 200; t++) {
    const a = 3 * gaussian(rand);
    const b = a + 2 * rand();
    let best = 0;
    for (let k = 0; k <= 400; k++) {
      const th = Math.tanh(a + ((b - a) * k) / 400);
      best = Math.max(best, 1 - th * th);
    }
    const bound = tanhDerivativeBound(a, b);
    assert.ok(bound >= best - 1e-15 && bound <= best + 1e-4, `${bound} vs ${best}`);
  }
});
