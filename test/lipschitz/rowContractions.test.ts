// The blocked contractions of `fused` (src/lipschitz/rules/rowContractions.ts) and the LayerNorm
// Gram matrices of preRowwise equal their definitions: the new forms against the plain ones, to
// 1e-9 relative in float64 (issue 35: "prove the new forms equal the old ones").
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  packedOuters,
  packedQuadraticForms,
  packedSize,
  packSymmetric,
  unpackSymmetric,
  weightedRowSums,
} from "../../src/lipschitz/rules/rowContractions.ts";
import {
  attentionHeadBounds,
  headWeightNorms,
  type HeadWeights,
} from "../../src/lipschitz/rules/attentionHead.ts";
import { denseRowJacobian, layerNormRowJacobian } from "../../src/lipschitz/rules/rowwise.ts";
import { preRowwise } from "../../src/lipschitz/rules/preRowwise.ts";
import { layerNorm64 } from "../helpers/reference64.ts";
import { headForward, mulberry32, normals, pick, randomAllowed, sigmaMax } from "./rulesHelpers.ts";

const close = (got: number, want: number, what: string, rel = 1e-9) =>
  assert.ok(
    Math.abs(got - want) <= rel * Math.max(Math.abs(want), 1e-300) + 1e-300,
    `${what}: ${got} against ${want} (relative ${Math.abs(got - want) / Math.abs(want)})`,
  );

test("weightedRowSums is the row-by-row sum bit for bit, zero weights skipped, any number of rows", () => {
  const rand = mulberry32(3501);
  for (const rowsCount of [1, 3, 4, 5, 9]) {
    const n = 7;
    const width = 11;
    const w = Float64Array.from({ length: n * n }, () => (rand() < 0.3 ? 0 : rand()));
    const z = normals(rand, n * width);
    const rows = Array.from({ length: rowsCount }, () => Math.floor(rand() * n));
    const got = weightedRowSums(rows, n, width, w, z);
    for (let r = 0; r < rowsCount; r++)
      for (let t = 0; t < width; t++) {
        let want = 0;
        for (let j = 0; j < n; j++)
          if (w[rows[r] * n + j] !== 0) want += w[rows[r] * n + j] * z[j * width + t];
        assert.equal(got[r * width + t], want, `row ${r} entry ${t}`);
      }
  }
});

test("packed outer products, packing and quadratic forms equal the full matrices' to 1e-12", () => {
  const rand = mulberry32(3502);
  for (const dk of [1, 2, 5, 8]) {
    const n = 6;
    const m = 5;
    const x = normals(rand, n * dk);
    const keep = Uint8Array.from({ length: n }, () => (rand() < 0.8 ? 1 : 0));
    const outer = packedOuters(x, n, dk, keep);
    const full = new Float64Array(dk * dk);
    for (let j = 0; j < n; j++) {
      unpackSymmetric(outer.subarray(j * packedSize(dk), (j + 1) * packedSize(dk)), dk, full);
      for (let a = 0; a < dk; a++)
        for (let b = 0; b < dk; b++)
          assert.equal(full[a * dk + b], keep[j] ? x[j * dk + a] * x[j * dk + b] : 0);
    }
    // Symmetric S_j, packed, against the plain x S x^T.
    const s = new Float64Array(m * dk * dk);
    for (let j = 0; j < m; j++)
      for (let a = 0; a < dk; a++)
        for (let b = a; b < dk; b++) {
          const v = rand() - 0.5;
          s[j * dk * dk + a * dk + b] = v;
          s[j * dk * dk + b * dk + a] = v;
        }
    const forms = packedQuadraticForms(x, n, dk, packSymmetric(s, m, dk), m);
    for (let i = 0; i < n; i++)
      for (let j = 0; j < m; j++) {
        let want = 0;
        let size = 0;
        for (let a = 0; a < dk; a++)
          for (let b = 0; b < dk; b++) {
            const t = x[i * dk + a] * s[j * dk * dk + a * dk + b] * x[i * dk + b];
            want += t;
            size += Math.abs(t);
          }
        assert.ok(Math.abs(forms[i * m + j] - want) <= 1e-12 * size, `form ${i},${j}`);
      }
  }
});

/** ||V^T J_i diag(c)||_2^2 from its definition: the d_k x n matrix formed and its spectral norm. */
function keyPathRow(
  v: Float64Array,
  p: Float64Array,
  i: number,
  n: number,
  dk: number,
  c: (j: number) => number,
): number {
  const m = new Float64Array(dk * n);
  for (let a = 0; a < dk; a++)
    for (let j = 0; j < n; j++) {
      let s = p[i * n + j] * v[j * dk + a];
      for (let l = 0; l < n; l++) s -= v[l * dk + a] * p[i * n + l] * p[i * n + j];
      m[a * n + j] = s * c(j);
    }
  return sigmaMax(m, dk, n) ** 2;
}

test("fused's per-row key paths (tau_i^2, pair_i^2) and a LayerNorm row's Gram matrices equal their definitions to 1e-9 (300 heads)", () => {
  const rand = mulberry32(3503);
  let cases = 0;
  for (let t = 0; cases < 300; t++) {
    const heads = pick(rand, [1, 2, 3]);
    const dk = pick(rand, [1, 2, 4]);
    const d = heads * dk;
    if (d < 2) continue;
    const n = 1 + Math.floor(rand() * 7);
    const eps = pick(rand, [1e-12, 1e-5, 1e-3]);
    const u = new Float64Array(n * d);
    for (let j = 0; j < n; j++) {
      const spread = pick(rand, [1, 0.1, 1e-3]);
      const row = normals(rand, d, spread);
      const offset = 5 * (rand() - 0.5);
      for (let a = 0; a < d; a++) u[j * d + a] = row[a] + offset;
    }
    const gamma = Float64Array.from(normals(rand, d, 1), (g) => (rand() < 0.1 ? 0 : g));
    const x = layerNorm64(
      u,
      n,
      { data: Float32Array.from(gamma), shape: [d] },
      { data: new Float32Array(d), shape: [d] },
      eps,
    );
    const full = () => normals(rand, d * d, pick(rand, [0.3, 1, 3]) / Math.sqrt(d));
    const w = { wq: full(), wk: full(), wv: full() };
    const ln = Array.from({ length: n }, (_, j) =>
      layerNormRowJacobian(u.subarray(j * d, (j + 1) * d), gamma, eps),
    );
    const fast = preRowwise((j) => ln[j], n, w, heads, 1);
    // The same rows as plain dense Jacobians: the explicit products' Gram matrices.
    const plain = preRowwise((j) => denseRowJacobian(ln[j].matrix(), d), n, w, heads, 1);
    const allowed = rand() < 0.5 ? randomAllowed(rand, n) : undefined;
    for (let h = 0; h < heads; h++) {
      // A row's own scale ||diag(gamma)/s||_F ||W_h||_F (before the projection P): where P removes
      // nearly all of a row (d <= 3, a row normalised to nearly +-1 entries), both forms lose what
      // cancels at 1e-16 of it, and the LayerNorm form's margin is 1e-13 of it.
      let wh = 0;
      for (let a = 0; a < d; a++)
        for (let c = 0; c < dk; c++)
          wh +=
            w.wk[a * d + h * dk + c] ** 2 +
            w.wq[a * d + h * dk + c] ** 2 +
            w.wv[a * d + h * dk + c] ** 2;
      for (let j = 0; j < n; j++) {
        const scale2 = (gamma.reduce((acc, g) => acc + g * g, 0) / ln[j].layerNorm!.s ** 2) * wh;
        for (let e = j * dk * dk; e < (j + 1) * dk * dk; e++) {
          assert.ok(
            Math.abs(fast[h].gramQ[e] - plain[h].gramQ[e]) <=
              1e-9 * Math.abs(plain[h].gramQ[e]) + 1e-13 * scale2,
            `case ${t}: gramQ entry ${e}`,
          );
        }
        if (d >= 4) {
          close(fast[h].kappa[j], plain[h].kappa[j], `case ${t} head ${h}: kappa_${j}`);
          close(fast[h].nu[j], plain[h].nu[j], `case ${t} head ${h}: nu_${j}`);
        }
        // Never below: the LayerNorm form adds its rounding margin (the explicit product has none).
        assert.ok(
          fast[h].kappa[j] >= plain[h].kappa[j] - 1e-7 * Math.sqrt(scale2),
          `case ${t}: kappa below the explicit product's`,
        );
        assert.ok(
          fast[h].kappa[j] <= plain[h].kappa[j] * (1 + 1e-9) + 1e-6 * Math.sqrt(scale2),
          `case ${t}: kappa far above the explicit product's`,
        );
      }
      const cols = (m: Float64Array) =>
        Float64Array.from(
          { length: d * dk },
          (_, k) => m[Math.floor(k / dk) * d + h * dk + (k % dk)],
        );
      const hw: HeadWeights = { d, dk, wq: cols(w.wq), wk: cols(w.wk), wv: cols(w.wv) };
      const f = headForward(x, n, hw, allowed);
      const act = { n, x, q: f.q, k: f.k, v: f.v, p: f.p, allowed };
      const norms = headWeightNorms(hw);
      for (const pre of [undefined, fast[h]]) {
        const r = attentionHeadBounds(act, norms, {
          variants: ["fused"],
          pre,
          keepRows: true,
        }).fusedRows!;
        const p = Float64Array.from(f.p);
        for (let i = 0; i < n; i++) {
          if (!r.live[i]) continue;
          const kappa = (j: number) => (pre === undefined ? norms.wk : pre.kappa[j]);
          // rho_ij, or with size: the square root of the sum of its terms' absolute values.
          const rho = (j: number, size = false) => {
            const g =
              pre === undefined ? norms.gk : pre.gramK.subarray(j * dk * dk, (j + 1) * dk * dk);
            let s = 0;
            for (let a = 0; a < dk; a++)
              for (let b = 0; b < dk; b++) {
                const term = f.q[i * dk + a] * g[a * dk + b] * f.q[i * dk + b];
                s += size ? Math.abs(term) : term;
              }
            return Math.sqrt(Math.max(s, 0));
          };
          const v = Float64Array.from(f.v);
          const tau2 = keyPathRow(v, p, i, n, dk, kappa);
          const pair2 = keyPathRow(v, p, i, n, dk, rho);
          // Rounding where a row's terms cancel (a one-hot row has J_i = 0; rho_ij where G_K,j is
          // nearly singular, as after a LayerNorm that removes nearly all of a row): 1e-12 of their size.
          let vv = 0;
          let cMax = 0;
          for (let j = 0; j < n; j++) {
            for (let a = 0; a < dk; a++) vv += v[j * dk + a] ** 2;
            cMax = Math.max(cMax, kappa(j), rho(j, true));
          }
          const floor = 1e-12 * vv * cMax * cMax;
          assert.ok(
            Math.abs(r.tau2[i] - tau2) <= 1e-9 * tau2 + floor,
            `case ${t} row ${i}: tau^2 ${r.tau2[i]} against ${tau2}`,
          );
          assert.ok(
            Math.abs(r.pair2[i] - pair2) <= 1e-9 * pair2 + floor,
            `case ${t} row ${i}: pair^2 ${r.pair2[i]} against ${pair2}`,
          );
        }
      }
      cases++;
    }
  }
});
