// Attention-head rules (docs/math.md section 2): validity against dense Jacobians, the ordering of
// the variants, masks, and the linear algebra underneath.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Matrix, SingularValueDecomposition } from "ml-matrix";
import {
  HEAD_VARIANTS,
  attentionHeadBounds,
  headWeightNorms,
  type HeadVariant,
  type HeadWeights,
} from "../../src/lipschitz/rules/attentionHead.ts";
import {
  spectralNorm,
  sqrtFactor,
  symMaxEigenvalue,
  gramCols,
} from "../../src/lipschitz/linalg.ts";
import { attention64 } from "../helpers/reference64.ts";
import type { NamedArray } from "../../src/nn/params.ts";
import {
  fdJacobian,
  headForward,
  headJacobian,
  median,
  mulberry32,
  normals,
  pick,
  randomAllowed,
  randomHeadWeights,
  sigmaMax,
  type Rand,
} from "./rulesHelpers.ts";

const TOL = 1e-4;

test("symMaxEigenvalue / spectralNorm match ml-matrix SVD and never fall below it", () => {
  const rand = mulberry32(11);
  for (let t = 0; t < 150; t++) {
    const rows = 1 + Math.floor(rand() * 20);
    const cols = 1 + Math.floor(rand() * 20);
    const rank = 1 + Math.floor(rand() * Math.min(rows, cols));
    // M = U V^T with inner dimension `rank` (rank-deficient cases), sometimes scaled tiny/huge.
    const u = normals(rand, rows * rank);
    const v = normals(rand, rank * cols);
    const scale = pick(rand, [1e-6, 1, 1e6]);
    const m = new Float64Array(rows * cols);
    for (let i = 0; i < rows; i++)
      for (let j = 0; j < cols; j++) {
        let s = 0;
        for (let r = 0; r < rank; r++) s += u[i * rank + r] * v[r * cols + j];
        m[i * cols + j] = s * scale;
      }
    if (rand() < 0.1) m.fill(0);
    const ref = new SingularValueDecomposition(
      new Matrix(rows, cols).setSubMatrix(to2d(m, rows, cols), 0, 0),
      {
        autoTranspose: true,
      },
    ).diagonal[0];
    const mine = spectralNorm(m, rows, cols);
    assert.ok(mine >= ref * (1 - 1e-12), `${rows}x${cols}: ${mine} < ${ref}`);
    assert.ok(mine <= ref * (1 + 1e-9) + 1e-300, `${rows}x${cols}: ${mine} vs ${ref}`);
  }
  // Close top eigenvalues (where power iteration would stall) and a diagonal matrix.
  const diag = new Float64Array(16);
  for (let i = 0; i < 4; i++) diag[i * 5] = [1, 1 - 1e-12, 0.5, -3][i];
  assert.ok(Math.abs(symMaxEigenvalue(diag, 4) - 1) < 1e-13);
  assert.equal(spectralNorm(new Float64Array(0), 0, 3), 0);
});

test("sqrtFactor: F^T F = G", () => {
  const rand = mulberry32(12);
  for (let t = 0; t < 30; t++) {
    const m = 1 + Math.floor(rand() * 10);
    const rows = 1 + Math.floor(rand() * 12);
    const a = normals(rand, rows * m);
    const g = gramCols(a, rows, m);
    const f = sqrtFactor(g, m);
    const back = gramCols(f, m, m);
    let err = 0;
    let scale = 0;
    for (let i = 0; i < m * m; i++) {
      err = Math.max(err, Math.abs(back[i] - g[i]));
      scale = Math.max(scale, Math.abs(g[i]));
    }
    assert.ok(err <= 1e-12 * Math.max(scale, 1), `err ${err}`);
  }
});

function to2d(m: Float64Array, rows: number, cols: number): number[][] {
  return Array.from({ length: rows }, (_, i) => Array.from(m.subarray(i * cols, (i + 1) * cols)));
}

/** A random head configuration (see the brief: n 2..64 mostly small, scales 0.3..3, biases, masks). */
function randomHeadCase(
  rand: Rand,
  options: { n?: number; d?: number; dk?: number; bias?: boolean } = {},
) {
  const d = options.d ?? 2 + Math.floor(rand() * 11);
  const divisors = Array.from({ length: d }, (_, i) => i + 1).filter((h) => d % h === 0);
  const dk = options.dk ?? d / pick(rand, divisors);
  const u = rand();
  const n =
    options.n ??
    (u < 0.85
      ? 2 + Math.floor(rand() * 9)
      : u < 0.95
        ? 11 + Math.floor(rand() * 14)
        : 25 + Math.floor(rand() * 40));
  const scale = pick(rand, [0.3, 0.5, 1, 2, 3]);
  const xScale = pick(rand, [0.3, 1, 1, 3]); // flat ... sharp attention
  const bias = options.bias ?? rand() < 0.5;
  const w = randomHeadWeights(rand, d, dk, scale, bias);
  const x = normals(rand, n * d, xScale);
  if (rand() < 0.3) {
    const offset = normals(rand, d, 2);
    for (let i = 0; i < n; i++) for (let a = 0; a < d; a++) x[i * d + a] += offset[a];
  }
  const allowed = randomAllowed(rand, n);
  return { n, d, dk, w, x, allowed, bias, scale };
}

function boundsOf(c: { n: number; x: Float64Array; w: HeadWeights; allowed?: Uint8Array }) {
  const f = headForward(c.x, c.n, c.w, c.allowed);
  return attentionHeadBounds(
    { n: c.n, x: c.x, q: f.q, k: f.k, v: f.v, p: f.p, allowed: c.allowed },
    headWeightNorms(c.w),
  );
}

test("the analytic head Jacobian (test oracle) matches central finite differences", () => {
  const rand = mulberry32(21);
  for (let t = 0; t < 30; t++) {
    const c = randomHeadCase(rand, { n: 2 + Math.floor(rand() * 6) });
    const J = headJacobian(c.x, c.n, c.w, c.allowed);
    const F = fdJacobian((x) => headForward(x, c.n, c.w, c.allowed).out, c.x, 1e-6);
    let err = 0;
    let scale = 1e-3;
    for (let i = 0; i < J.length; i++) {
      err = Math.max(err, Math.abs(J[i] - F[i]));
      scale = Math.max(scale, Math.abs(J[i]));
    }
    assert.ok(err / scale < 1e-6, `case ${t}: rel err ${err / scale}`);
  }
});

test("the float64 head oracle agrees with reference64.attention64 (W_O = I)", () => {
  const rand = mulberry32(22);
  for (let t = 0; t < 10; t++) {
    const d = 6;
    const heads = 2;
    const dk = 3;
    const n = 5;
    const ws = [randomHeadWeights(rand, d, dk, 1, true), randomHeadWeights(rand, d, dk, 1, true)];
    const x = normals(rand, n * d);
    const allowed = randomAllowed(rand, n, "rows");
    const full = (
      pick: (w: HeadWeights) => Float64Array | undefined,
      cols: boolean,
    ): NamedArray => {
      const data = new Float32Array(cols ? d * d : d);
      for (let h = 0; h < heads; h++) {
        const m = pick(ws[h]) as Float64Array;
        if (cols)
          for (let a = 0; a < d; a++)
            for (let c = 0; c < dk; c++) data[a * d + h * dk + c] = m[a * dk + c];
        else for (let c = 0; c < dk; c++) data[h * dk + c] = m[c];
      }
      return { data, shape: cols ? [d, d] : [d] };
    };
    const eye = new Float32Array(d * d);
    for (let i = 0; i < d; i++) eye[i * d + i] = 1;
    const weights = new Map<string, NamedArray>([
      ["a.wq", full((w) => w.wq, true)],
      ["a.wk", full((w) => w.wk, true)],
      ["a.wv", full((w) => w.wv, true)],
      ["a.bq", full((w) => w.bq, false)],
      ["a.bk", full((w) => w.bk, false)],
      ["a.bv", full((w) => w.bv, false)],
      ["a.wo", { data: eye, shape: [d, d] }],
      ["a.bo", { data: new Float32Array(d), shape: [d] }],
    ]);
    const ref = attention64(x, n, heads, weights, "a", allowed);
    for (let h = 0; h < heads; h++) {
      const mine = headForward(x, n, ws[h], allowed).out;
      for (let i = 0; i < n; i++)
        for (let c = 0; c < dk; c++)
          assert.ok(Math.abs(mine[i * dk + c] - ref.out[i * d + h * dk + c]) < 1e-12);
    }
  }
});

test("every head variant is >= the true local Lipschitz constant on 260 random heads; the variants are ordered", () => {
  const rand = mulberry32(31);
  let masked = 0;
  let biased = 0;
  for (let t = 0; t < 260; t++) {
    const c = randomHeadCase(rand);
    if (c.allowed) masked++;
    if (c.bias) biased++;
    const r = boundsOf(c);
    const truth = sigmaMax(headJacobian(c.x, c.n, c.w, c.allowed), c.n * c.dk, c.n * c.d);
    const v = r.values;
    for (const name of HEAD_VARIANTS) {
      assert.ok(Number.isFinite(v[name]), `case ${t} ${name} not finite`);
      assert.ok(
        v[name] >= truth * (1 - TOL),
        `case ${t} (n ${c.n}, d ${c.d}, dk ${c.dk}, bias ${c.bias}): ${name} = ${v[name]} < true ${truth}`,
      );
    }
    const chain: HeadVariant[] = [
      "cov",
      "dist",
      "t3-exact",
      "t3-quad",
      "t3-top2",
      "t3-half",
      "t3-one",
    ];
    for (let i = 0; i + 1 < chain.length; i++)
      assert.ok(
        v[chain[i]] <= v[chain[i + 1]] * (1 + 1e-12),
        `case ${t}: ${chain[i]} ${v[chain[i]]} > ${chain[i + 1]} ${v[chain[i + 1]]}`,
      );
    if (!c.bias)
      assert.ok(
        v["t3-top2"] <= v.paper * (1 + 1e-12),
        `case ${t}: t3-top2 ${v["t3-top2"]} > paper ${v.paper}`,
      );
  }
  assert.ok(masked > 80 && biased > 80, `coverage: ${masked} masked, ${biased} biased`);
});

test("fully masked query rows give finite bounds and contribute nothing", () => {
  const rand = mulberry32(41);
  const n = 6;
  const w = randomHeadWeights(rand, 4, 2, 2, true);
  const x = normals(rand, n * 4);
  const none = new Uint8Array(n * n);
  const all = boundsOf({ n, x, w, allowed: none });
  for (const name of HEAD_VARIANTS) assert.ok(Number.isFinite(all.values[name]), name);
  for (const name of HEAD_VARIANTS)
    if (name !== "castin" && name !== "paper") assert.equal(all.values[name], 0, name);
  // Masking rows 2..5 completely: the bound equals the one computed on the live rows' P alone.
  const some = new Uint8Array(n * n);
  for (let i = 0; i < 2; i++) some.fill(1, i * n, i * n + n);
  const r = boundsOf({ n, x, w, allowed: some });
  for (const name of HEAD_VARIANTS) assert.ok(Number.isFinite(r.values[name]), name);
  const truth = sigmaMax(headJacobian(x, n, w, some), n * 2, n * 4);
  for (const name of HEAD_VARIANTS) assert.ok(r.values[name] >= truth * (1 - TOL), name);
  assert.deepEqual([...r.rows.live], [1, 1, 0, 0, 0, 0]);
});

test("median ratio bound / true per variant (docs/math.md protocol: n 10, d 12, d_k 6, scales 0.3..3, half with biases)", () => {
  const rand = mulberry32(51);
  const ratios: Record<string, number[]> = Object.fromEntries(HEAD_VARIANTS.map((v) => [v, []]));
  const paperBiasFree: number[] = [];
  const castinBiasFree: number[] = [];
  for (let t = 0; t < 60; t++) {
    const d = 12;
    const dk = 6;
    const n = 10;
    const scale = 0.3 * Math.pow(10, rand()); // log-uniform in [0.3, 3]
    const bias = t % 2 === 1;
    const w = randomHeadWeights(rand, d, dk, scale, bias);
    const x = normals(rand, n * d);
    const r = boundsOf({ n, x, w });
    const truth = sigmaMax(headJacobian(x, n, w), n * dk, n * d);
    for (const name of HEAD_VARIANTS) {
      assert.ok(r.values[name] >= truth * (1 - TOL), name);
      ratios[name].push(r.values[name] / truth);
    }
    if (!bias) {
      paperBiasFree.push(r.values.paper / truth);
      castinBiasFree.push(r.values.castin / truth);
    }
  }
  const lines = HEAD_VARIANTS.map(
    (name) =>
      `  ${name.padEnd(9)} median ${median(ratios[name]).toFixed(2).padStart(7)}  min ${Math.min(
        ...ratios[name],
      )
        .toFixed(2)
        .padStart(6)}  max ${Math.max(...ratios[name])
        .toFixed(2)
        .padStart(8)}`,
  );
  lines.push(
    `  paper (bias-free heads only)  median ${median(paperBiasFree).toFixed(2)}  max ${Math.max(...paperBiasFree).toFixed(2)}`,
  );
  lines.push(
    `  castin (bias-free heads only) median ${median(castinBiasFree).toFixed(2)}  max ${Math.max(...castinBiasFree).toFixed(2)}`,
  );
  console.log(`bound / true local Lipschitz constant over 60 heads:\n${lines.join("\n")}`);
});
