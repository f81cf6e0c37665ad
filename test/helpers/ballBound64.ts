// Test oracle for `attnlip certify`: L(x, r) of a ViT recomputed in plain float64 from the
// definitions of docs/math.md section 7, written apart from src/certify (no code shared with it):
// the forward pass of ./reference64.ts, spectral norms from ml-matrix's SVD of the explicit
// matrices (W_Q,h W_K,h^T formed, K and V centred by hand), the probability boxes from the
// softmax formula itself, sigma's box bound from sorted entries.
import { Matrix, SingularValueDecomposition } from "ml-matrix";
import type { VitConfig } from "../../src/nn/config.ts";
import type { NamedArray } from "../../src/nn/params.ts";
import {
  GELU_DERIVATIVE_MAX,
  GELU_ERF_DERIVATIVE_MAX,
  geluErfDerivative,
} from "../../src/nn/gelu.ts";
import { attention64, layerNorm64, mlp64, vitSequence64, type Weights } from "./reference64.ts";

function w(weights: Weights, name: string): NamedArray {
  const v = weights.get(name);
  if (v === undefined) throw new Error(`ballBound64: missing weight "${name}"`);
  return v;
}

function mat(rows: number, cols: number, data: ArrayLike<number>): Matrix {
  return Matrix.from1DArray(rows, cols, Array.from(data));
}

function norm2(m: Matrix): number {
  if (m.rows === 0 || m.columns === 0) return 0;
  return new SingularValueDecomposition(m, { autoTranspose: true }).norm2;
}

/** Columns h dk .. (h + 1) dk - 1 of a [d, d] weight. */
function headColumns(W: NamedArray, h: number, dk: number): Matrix {
  const d = W.shape[0];
  return mat(d, d, W.data).subMatrix(0, d - 1, h * dk, (h + 1) * dk - 1);
}

/** Per row, the standard deviation of x [n, d]. */
function rowStd(x: ArrayLike<number>, n: number, d: number): number[] {
  return Array.from({ length: n }, (_, i) => {
    const row = Array.from({ length: d }, (_, k) => x[i * d + k]);
    const mean = row.reduce((s, v) => s + v, 0) / d;
    return Math.sqrt(row.reduce((s, v) => s + (v - mean) ** 2, 0) / d);
  });
}

/** max|gamma| / sqrt(smallest variance in the ball + eps), over the given rows. */
function layerNormSup(
  x: ArrayLike<number>,
  rows: number[],
  d: number,
  gamma: NamedArray,
  eps: number,
  rho: number,
): number {
  const g = Math.max(...Array.from(gamma.data, Math.abs));
  const std = rowStd(x, x.length / d, d);
  return Math.max(
    ...rows.map((i) => g / Math.sqrt(Math.max(std[i] - rho / Math.sqrt(d), 0) ** 2 + eps)),
  );
}

/** sigma's bound over the box [lo, hi] of one row: min(max hi, Gershgorin, top2 closed form, 1/2). */
function sigmaOverBox(lo: number[], hi: number[]): number {
  if (lo.length <= 1) return 0;
  const his = [...hi].sort((a, b) => b - a);
  const gersh = Math.max(
    ...lo.map((l, k) => {
      const p = Math.min(Math.max(0.5, l), hi[k]);
      return 2 * p * (1 - p);
    }),
  );
  const aLo = Math.max(...lo);
  const a = Math.min(Math.max((1 + his[1]) / 2, aLo), his[0]);
  return Math.min(his[0], gersh, a * (1 - a + his[1]), 0.5);
}

/** The attention layer's sup over the ball of radius rho around y [n, d] (no mask). */
function attentionSup(
  y: Float64Array,
  n: number,
  cfg: VitConfig,
  weights: Weights,
  prefix: string,
  rho: number,
  rule: "dist" | "half",
): { sup: number; out: Float64Array } {
  const H = cfg.heads;
  const d = cfg.dModel;
  const dk = d / H;
  const att = attention64(y, n, H, weights, prefix);
  const heads: number[] = [];
  for (let h = 0; h < H; h++) {
    const Wq = headColumns(w(weights, `${prefix}.wq`), h, dk);
    const Wk = headColumns(w(weights, `${prefix}.wk`), h, dk);
    const Wv = headColumns(w(weights, `${prefix}.wv`), h, dk);
    const Q = mat(n, dk, att.q.subarray(h * n * dk, (h + 1) * n * dk));
    const K = mat(n, dk, att.k.subarray(h * n * dk, (h + 1) * n * dk));
    const V = mat(n, dk, att.v.subarray(h * n * dk, (h + 1) * n * dk));
    const P0 = mat(n, n, att.p.subarray(h * n * n, (h + 1) * n * n));
    const M = norm2(Wq.mmul(Wk.transpose()));
    const wv = norm2(Wv);
    const a = Array.from({ length: n }, (_, j) => norm2(Wq.mmul(K.getRowVector(j).transpose())));
    const b = Array.from({ length: n }, (_, i) => norm2(Wk.mmul(Q.getRowVector(i).transpose())));
    const S0 = Q.mmul(K.transpose()).div(Math.sqrt(dk));
    let sMax = 0;
    const colSum = new Array<number>(n).fill(0);
    let rowMax = 0;
    let dev2 = 0;
    for (let i = 0; i < n; i++) {
      const half = (j: number) =>
        i === j
          ? ((a[i] + b[i]) * rho + M * rho * rho) / Math.sqrt(dk)
          : (Math.sqrt(a[j] ** 2 + b[i] ** 2) * rho + (M * rho * rho) / 2) / Math.sqrt(dk);
      const lo = Array.from({ length: n }, (_, j) => S0.get(i, j) - half(j));
      const hi = Array.from({ length: n }, (_, j) => S0.get(i, j) + half(j));
      const top = Math.max(...hi);
      const pHi = hi.map((h0, j) => {
        const others = lo.reduce((s, l, k) => (k === j ? s : s + Math.exp(l - top)), 0);
        return Math.exp(h0 - top) / (Math.exp(h0 - top) + others);
      });
      const pLo = lo.map((l0, j) => {
        const others = hi.reduce((s, h0, k) => (k === j ? s : s + Math.exp(h0 - top)), 0);
        return Math.exp(l0 - top) / (Math.exp(l0 - top) + others);
      });
      let rowSum = 0;
      for (let j = 0; j < n; j++) {
        const p = P0.get(i, j);
        pHi[j] = Math.max(pHi[j], p);
        pLo[j] = Math.min(pLo[j], p);
        colSum[j] += pHi[j];
        rowSum += pHi[j];
        dev2 += Math.max(pHi[j] - p, p - pLo[j]) ** 2;
      }
      rowMax = Math.max(rowMax, Math.min(rowSum, 1));
      sMax = Math.max(sMax, rule === "half" ? 0.5 : sigmaOverBox(pLo, pHi));
    }
    const pBar = Math.min(Math.sqrt(Math.max(...colSum) * rowMax), norm2(P0) + Math.sqrt(dev2));
    const centred = (X: Matrix) => X.clone().subRowVector(X.mean("column"));
    const wqKc = norm2(Wq.mmul(centred(K).transpose()));
    const qWk = norm2(Q.mmul(Wk.transpose()));
    const vc = norm2(centred(V));
    heads.push(pBar * wv + (sMax * (wqKc + qWk + 2 * M * rho) * (vc + wv * rho)) / Math.sqrt(dk));
  }
  const wo = norm2(mat(d, d, w(weights, `${prefix}.wo`).data));
  return { sup: wo * Math.sqrt(heads.reduce((s, v) => s + v * v, 0)), out: att.out };
}

/** The MLP's sup over the ball of radius rho around z [n, d]. */
function mlpSup(
  z: Float64Array,
  n: number,
  cfg: VitConfig,
  weights: Weights,
  prefix: string,
  rho: number,
) {
  const W1 = w(weights, `${prefix}.w1`);
  const W2 = w(weights, `${prefix}.w2`);
  const [d, hidden] = W1.shape;
  const m = mlp64(z, n, weights, prefix, cfg.activation);
  let deriv = GELU_DERIVATIVE_MAX;
  if (cfg.activation === "gelu-erf") {
    const cols = mat(d, hidden, W1.data).transpose();
    const cMax = Math.max(
      ...Array.from({ length: hidden }, (_, j) => cols.getRowVector(j).norm("frobenius")),
    );
    const at = Math.max(...Array.from(m.h, (h) => Math.abs(geluErfDerivative(h))));
    deriv = Math.min(GELU_ERF_DERIVATIVE_MAX, at + Math.sqrt(2 / Math.PI) * rho * cMax);
  }
  return {
    sup: norm2(mat(d, hidden, W1.data)) * deriv * norm2(mat(hidden, d, W2.data)),
    out: m.out,
  };
}

/**
 * L(x, r) of a ViT (pre-LN or post-LN, dot-product attention, cls pooling after the final
 * LayerNorm) at image x (H W C values) for the l_2 radius r, rule "dist" or "half": the product
 * of per-layer sups, each layer's ball of radius the previous sups times r (docs/math.md
 * section 7).
 */
export function ballLipschitz64(
  cfg: VitConfig,
  weights: Weights,
  image: ArrayLike<number>,
  r: number,
  rule: "dist" | "half",
): number {
  const d = cfg.dModel;
  const patch = w(weights, "patch.w");
  const embed = norm2(mat(patch.shape[0], patch.shape[1], patch.data));
  let x = vitSequence64(cfg, weights, image);
  const n = x.length / d;
  const all = [...Array(n).keys()];
  let rho = embed * r;
  let L = embed;
  const step = (factor: number) => {
    L *= factor;
    rho *= factor;
  };
  for (let i = 0; i < cfg.blocks; i++) {
    const pre = `blocks.${i}`;
    const ln = (t: Float64Array, which: string) => ({
      sup: (radius: number) =>
        layerNormSup(t, all, d, w(weights, `${pre}.${which}.gamma`), cfg.lnEps, radius),
      out: layerNorm64(
        t,
        n,
        w(weights, `${pre}.${which}.gamma`),
        w(weights, `${pre}.${which}.beta`),
        cfg.lnEps,
      ),
    });
    if (cfg.norm === "pre") {
      const ln1 = ln(x, "ln1");
      const s1 = ln1.sup(rho);
      const attn = attentionSup(ln1.out, n, cfg, weights, `${pre}.attn`, s1 * rho, rule);
      const mid = x.map((v, t) => v + attn.out[t]);
      step(1 + s1 * attn.sup);
      const ln2 = ln(mid, "ln2");
      const s2 = ln2.sup(rho);
      const mlp = mlpSup(ln2.out, n, cfg, weights, `${pre}.mlp`, s2 * rho);
      x = mid.map((v, t) => v + mlp.out[t]);
      step(1 + s2 * mlp.sup);
    } else {
      const attn = attentionSup(x, n, cfg, weights, `${pre}.attn`, rho, rule);
      const sum = x.map((v, t) => v + attn.out[t]);
      step(1 + attn.sup);
      const ln1 = ln(sum, "ln1");
      step(ln1.sup(rho));
      const mlp = mlpSup(ln1.out, n, cfg, weights, `${pre}.mlp`, rho);
      const sum2 = ln1.out.map((v, t) => v + mlp.out[t]);
      step(1 + mlp.sup);
      const ln2 = ln(sum2, "ln2");
      step(ln2.sup(rho));
      x = ln2.out;
    }
  }
  step(layerNormSup(x, [0], d, w(weights, "norm.gamma"), cfg.lnEps, rho));
  const head = w(weights, "head.w");
  step(norm2(mat(head.shape[0], head.shape[1], head.data)));
  return L;
}
