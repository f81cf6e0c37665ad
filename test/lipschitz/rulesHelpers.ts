// Oracles and random configurations for the Lipschitz rule tests: float64 forward passes,
// analytic and finite-difference Jacobians, and their largest singular value.
import { gaussian, mulberry32 } from "../helpers/random.ts";
import type { NamedArray } from "../../src/nn/params.ts";
import { spectralNorm } from "../../src/lipschitz/linalg.ts";
import type { HeadWeights } from "../../src/lipschitz/rules/attentionHead.ts";

export { gaussian, mulberry32 };

export type Rand = () => number;

/** n samples of N(0, std^2). */
export function normals(rand: Rand, n: number, std = 1): Float64Array {
  return Float64Array.from({ length: n }, () => std * gaussian(rand));
}

/** The same values rounded to float32 (weights live in float32 in the model). */
export function f32(a: ArrayLike<number>): Float64Array {
  return Float64Array.from(Float32Array.from(a as ArrayLike<number>));
}

/** A random pick. */
export function pick<T>(rand: Rand, xs: readonly T[]): T {
  return xs[Math.floor(rand() * xs.length)];
}

/** Median of a list. */
export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/**
 * A random allowed-keys matrix [n, n]: none (undefined), padding (last keys masked for every
 * query; padded queries attend to the real keys), causal, or padding with some fully masked
 * query rows.
 */
export function randomAllowed(
  rand: Rand,
  n: number,
  kind?: "none" | "pad" | "causal" | "rows",
): Uint8Array | undefined {
  const k = kind ?? pick(rand, ["none", "none", "pad", "causal", "rows"] as const);
  if (k === "none") return undefined;
  const a = new Uint8Array(n * n);
  const real = 1 + Math.floor(rand() * n); // at least one real key
  for (let i = 0; i < n; i++)
    for (let j = 0; j < n; j++) {
      if (k === "causal") a[i * n + j] = j <= i ? 1 : 0;
      else a[i * n + j] = j < real ? 1 : 0;
    }
  if (k === "rows") for (let i = 0; i < n; i++) if (rand() < 0.3) a.fill(0, i * n, (i + 1) * n);
  return a;
}

/** Result of {@link headForward}. */
export interface HeadForward {
  q: Float64Array;
  k: Float64Array;
  v: Float64Array;
  p: Float64Array;
  out: Float64Array;
}

/** One head in float64: Q = X W_Q + b_Q etc., P = masked rowsoftmax(Q K^T / sqrt(dk)), out = P V. */
export function headForward(
  x: ArrayLike<number>,
  n: number,
  w: HeadWeights,
  allowed?: ArrayLike<number>,
): HeadForward {
  const { d, dk } = w;
  const lin = (W: Float64Array, b?: Float64Array) => {
    const y = new Float64Array(n * dk);
    for (let i = 0; i < n; i++)
      for (let c = 0; c < dk; c++) {
        let s = b ? b[c] : 0;
        for (let a = 0; a < d; a++) s += x[i * d + a] * W[a * dk + c];
        y[i * dk + c] = s;
      }
    return y;
  };
  const q = lin(w.wq, w.bq);
  const k = lin(w.wk, w.bk);
  const v = lin(w.wv, w.bv);
  const p = new Float64Array(n * n);
  const out = new Float64Array(n * dk);
  const scale = 1 / Math.sqrt(dk);
  for (let i = 0; i < n; i++) {
    let max = -Infinity;
    const s = new Float64Array(n);
    for (let j = 0; j < n; j++) {
      if (allowed && !allowed[i * n + j]) continue;
      let t = 0;
      for (let c = 0; c < dk; c++) t += q[i * dk + c] * k[j * dk + c];
      s[j] = t * scale;
      max = Math.max(max, s[j]);
    }
    if (max === -Infinity) continue;
    let z = 0;
    for (let j = 0; j < n; j++) {
      if (allowed && !allowed[i * n + j]) continue;
      p[i * n + j] = Math.exp(s[j] - max);
      z += p[i * n + j];
    }
    for (let j = 0; j < n; j++) p[i * n + j] /= z;
    for (let c = 0; c < dk; c++) {
      let t = 0;
      for (let j = 0; j < n; j++) t += p[i * n + j] * v[j * dk + c];
      out[i * dk + c] = t;
    }
  }
  return { q, k, v, p, out };
}

/**
 * The dense Jacobian of one head, analytic: rows (i, c) of the output [n, dk], columns (r, a)
 * of the input [n, d]; Df[E] = P E W_V + dP V with dP_i = dS_i J(P_i),
 * dS_ij = (E_i W_Q k_j + q_i W_K^T E_j^T) / sqrt(dk) on allowed entries.
 */
export function headJacobian(
  x: ArrayLike<number>,
  n: number,
  w: HeadWeights,
  allowed?: ArrayLike<number>,
): Float64Array {
  const { d, dk } = w;
  const f = headForward(x, n, w, allowed);
  const { q, k, v, p } = f;
  const sq = Math.sqrt(dk);
  const cols = n * d;
  const J = new Float64Array(n * dk * cols);
  // wqk[a][j] = W_Q[a,:] . k_j; qwk[i][a] = q_i . W_K[a,:]
  const wqk = new Float64Array(d * n);
  const qwk = new Float64Array(n * d);
  for (let a = 0; a < d; a++)
    for (let j = 0; j < n; j++) {
      let s = 0;
      let t = 0;
      for (let c = 0; c < dk; c++) {
        s += w.wq[a * dk + c] * k[j * dk + c];
        t += q[j * dk + c] * w.wk[a * dk + c];
      }
      wqk[a * n + j] = s;
      qwk[j * d + a] = t;
    }
  const al = (i: number, j: number) => !allowed || Boolean(allowed[i * n + j]);
  const ds = new Float64Array(n);
  for (let r = 0; r < n; r++)
    for (let a = 0; a < d; a++) {
      const col = r * d + a;
      for (let i = 0; i < n; i++) {
        // value path
        for (let c = 0; c < dk; c++)
          J[(i * dk + c) * cols + col] += p[i * n + r] * w.wv[a * dk + c];
        // dS_i
        let mean = 0;
        for (let j = 0; j < n; j++) {
          let s = 0;
          if (al(i, j)) {
            if (i === r) s += wqk[a * n + j];
            if (j === r) s += qwk[i * d + a];
          }
          ds[j] = s / sq;
          mean += p[i * n + j] * ds[j];
        }
        for (let j = 0; j < n; j++) {
          const dp = p[i * n + j] * (ds[j] - mean);
          if (dp === 0) continue;
          for (let c = 0; c < dk; c++) J[(i * dk + c) * cols + col] += dp * v[j * dk + c];
        }
      }
    }
  return J;
}

/** Central finite-difference Jacobian [out, in] of f at x (float64). */
export function fdJacobian(
  f: (x: Float64Array) => ArrayLike<number>,
  x: Float64Array,
  h = 1e-5,
): Float64Array {
  const y0 = f(x);
  const m = y0.length;
  const D = x.length;
  const J = new Float64Array(m * D);
  const xp = Float64Array.from(x);
  for (let t = 0; t < D; t++) {
    const step = h * Math.max(1, Math.abs(x[t]));
    xp[t] = x[t] + step;
    const yp = f(xp);
    xp[t] = x[t] - step;
    const ym = f(xp);
    xp[t] = x[t];
    for (let i = 0; i < m; i++) J[i * D + t] = (yp[i] - ym[i]) / (2 * step);
  }
  return J;
}

/** Largest singular value of a dense [rows, cols] Jacobian. */
export function sigmaMax(J: Float64Array, rows: number, cols: number): number {
  return spectralNorm(J, rows, cols);
}

/** Random head weights: W ~ N(0, scale^2 / d), optional biases ~ N(0, (scale/2)^2), rounded to float32. */
export function randomHeadWeights(
  rand: Rand,
  d: number,
  dk: number,
  scale: number,
  bias: boolean,
): HeadWeights {
  const W = () => f32(normals(rand, d * dk, scale / Math.sqrt(d)));
  const B = () => (bias ? f32(normals(rand, dk, scale / 2)) : undefined);
  return { d, dk, wq: W(), wk: W(), wv: W(), bq: B(), bk: B(), bv: B() };
}

/** Shapes of a block. */
export interface BlockShape {
  dModel: number;
  heads: number;
  mlpHidden: number;
  classes?: number;
}

/**
 * A weights map with random values for `blocks` blocks (+ norm, head): weight matrices
 * N(0, scale^2 / fanIn), biases N(0, (scale/4)^2) or absent for Q/K/V, gammas 1 + N(0, 0.3^2),
 * betas N(0, 0.1^2). Extra entries (patch, tok, pos, cls) from `extra`.
 */
export function randomWeights(
  rand: Rand,
  shape: BlockShape & { blocks: number },
  scale: number,
  qkvBias: boolean,
  extra: Record<string, number[]> = {},
): Map<string, NamedArray> {
  const { dModel: d, mlpHidden: m } = shape;
  const out = new Map<string, NamedArray>();
  const put = (name: string, dims: number[], std: number, mean = 0) => {
    const size = dims.reduce((a, b) => a * b, 1);
    const data = Float32Array.from(normals(rand, size, std), (v) => v + mean);
    out.set(name, { data, shape: dims });
  };
  for (const [name, dims] of Object.entries(extra))
    put(name, dims, name === "patch.w" ? scale / Math.sqrt(dims[0]) : 0.5);
  for (let i = 0; i < shape.blocks; i++) {
    const pre = `blocks.${i}`;
    put(`${pre}.ln1.gamma`, [d], 0.3, 1);
    put(`${pre}.ln1.beta`, [d], 0.1);
    for (const t of ["q", "k", "v"]) {
      put(`${pre}.attn.w${t}`, [d, d], scale / Math.sqrt(d));
      if (qkvBias) put(`${pre}.attn.b${t}`, [d], scale / 4);
    }
    put(`${pre}.attn.wo`, [d, d], 1 / Math.sqrt(d));
    put(`${pre}.attn.bo`, [d], 0.1);
    put(`${pre}.ln2.gamma`, [d], 0.3, 1);
    put(`${pre}.ln2.beta`, [d], 0.1);
    put(`${pre}.mlp.w1`, [d, m], scale / Math.sqrt(d));
    put(`${pre}.mlp.b1`, [m], 0.5);
    put(`${pre}.mlp.w2`, [m, d], 1 / Math.sqrt(m));
    put(`${pre}.mlp.b2`, [d], 0.1);
  }
  put("norm.gamma", [d], 0.3, 1);
  put("norm.beta", [d], 0.1);
  put("head.w", [d, shape.classes ?? 3], 1 / Math.sqrt(d));
  put("head.b", [shape.classes ?? 3], 0.1);
  return out;
}

/**
 * Random weights for a one-block ViT on 4x4 images with 2x2 patches (5 tokens): {@link
 * randomWeights} at a scale of 0.3, 1 or 3 drawn from `rand`, with the embedding's tensors.
 */
export function tinyVitWeights(rand: Rand, c: BlockShape & { blocks: number; qkvBias: boolean }): Map<string, NamedArray> {
  return randomWeights(rand, c, pick(rand, [0.3, 1, 3]), c.qkvBias, {
    "patch.w": [4, c.dModel],
    "patch.b": [c.dModel],
    cls: [1, c.dModel],
    pos: [5, c.dModel],
  });
}
