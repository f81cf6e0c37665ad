// The input Jacobian of L2 attention (Kim et al.'s L2-MHA, src/nn/l2Attention.ts) of one
// sequence in float64, by forward-mode differentiation written from the definition on top of
// the one float64 forward pass (reference64.ts l2Attention64Ref): exact to rounding at any
// input scale (central differences lose their digits when the scores are ~1e6).
import { spectralNorm } from "../../src/lipschitz/linalg.ts";
import type { NamedArray } from "../../src/nn/params.ts";
import { l2AttentionLayer64 } from "./reference64.ts";

/**
 * d out / d x of L2 attention at x [n, d]: per head q_j = x_j W^{Q,h},
 * s_ij = -||q_i - q_j||^2 / sqrt(d_k), P = rowsoftmax(s) over the allowed keys (masked entries
 * 0, a row with no allowed key 0), v_j = q_j M_h (M_h = W^{Q,h}^T W^{V,h} / sqrt(d_k)),
 * out = [P_h V_h]_h W_O (+ biases, which do not move it).
 *
 * @param params wq, wv, wo [d, d] (bv, bo ignored: constants).
 * @param allowed optional [n * n] (row = query), nonzero = may attend; absent = all.
 * @returns J [(n d) x (n d)] row-major, J[r][c] = d out_r / d x_c.
 * @example spectralNorm(l2Jacobian64(x, 4, 2, params), 4 * d, 4 * d)
 */
export function l2Jacobian64(
  x: ArrayLike<number>,
  n: number,
  heads: number,
  params: Readonly<Record<string, NamedArray>>,
  allowed?: ArrayLike<number>,
): Float64Array {
  const d = params.wq.shape[0];
  const dk = d / heads;
  const wq = params.wq.data;
  const wv = params.wv.data;
  const wo = params.wo.data;
  const sq = Math.sqrt(dk);
  // Q, V = Q M_h (no value bias: a constant) and P from the one float64 forward pass.
  const forward = l2AttentionLayer64(
    x,
    n,
    heads,
    { wq: params.wq, wv: params.wv, wo: params.wo, bo: { data: new Float32Array(d), shape: [d] } },
    allowed,
  );
  const Q = new Float64Array(n * d);
  const V = new Float64Array(n * d);
  for (let h = 0; h < heads; h++)
    for (let r = 0; r < n; r++)
      for (let c = 0; c < dk; c++) {
        Q[r * d + h * dk + c] = forward.q[(h * n + r) * dk + c];
        V[r * d + h * dk + c] = forward.v[(h * n + r) * dk + c];
      }
  const P = forward.p;
  // M_h = W^{Q,h}^T W^{V,h} / sqrt(d_k): dV = dQ M_h.
  const M = new Float64Array(heads * dk * dk);
  for (let h = 0; h < heads; h++)
    for (let a = 0; a < dk; a++)
      for (let c = 0; c < dk; c++) {
        let s = 0;
        for (let i = 0; i < d; i++) s += wq[i * d + h * dk + a] * wv[i * d + h * dk + c];
        M[(h * dk + a) * dk + c] = s / sq;
      }
  const nd = n * d;
  const J = new Float64Array(nd * nd);
  const dQ = new Float64Array(nd);
  const dV = new Float64Array(nd);
  const ctx = new Float64Array(nd);
  for (let t = 0; t < n; t++)
    for (let c = 0; c < d; c++) {
      // Direction e_{t,c}: dq_t = W_Q[c, :], dq_j = 0 otherwise.
      dQ.fill(0);
      for (let o = 0; o < d; o++) dQ[t * d + o] = wq[c * d + o];
      dV.fill(0);
      for (let h = 0; h < heads; h++)
        for (let e = 0; e < dk; e++) {
          let s = 0;
          for (let a = 0; a < dk; a++) s += dQ[t * d + h * dk + a] * M[(h * dk + a) * dk + e];
          dV[t * d + h * dk + e] = s;
        }
      ctx.fill(0);
      const ds = new Float64Array(n);
      for (let h = 0; h < heads; h++)
        for (let i = 0; i < n; i++) {
          let mean = 0;
          for (let j = 0; j < n; j++) {
            let g = 0;
            for (let a = 0; a < dk; a++) {
              const diff = Q[i * d + h * dk + a] - Q[j * d + h * dk + a];
              g += diff * (dQ[i * d + h * dk + a] - dQ[j * d + h * dk + a]);
            }
            ds[j] = (-2 * g) / sq;
            mean += P[(h * n + i) * n + j] * ds[j];
          }
          for (let j = 0; j < n; j++) {
            const pij = P[(h * n + i) * n + j];
            const dp = pij * (ds[j] - mean);
            for (let e = 0; e < dk; e++)
              ctx[i * d + h * dk + e] += dp * V[j * d + h * dk + e] + pij * dV[j * d + h * dk + e];
          }
        }
      const col = t * d + c;
      for (let r = 0; r < n; r++)
        for (let o = 0; o < d; o++) {
          let s = 0;
          for (let i = 0; i < d; i++) s += ctx[r * d + i] * wo[i * d + o];
          J[(r * d + o) * nd + col] = s;
        }
    }
  return J;
}

/** ||Df(X)||_2 of L2 attention at x [n, d] ({@link l2Jacobian64}'s spectral norm). */
export function l2LocalLipschitz64(
  x: ArrayLike<number>,
  n: number,
  heads: number,
  params: Readonly<Record<string, NamedArray>>,
  allowed?: ArrayLike<number>,
): number {
  return spectralNorm(
    l2Jacobian64(x, n, heads, params, allowed),
    n * params.wq.shape[0],
    n * params.wq.shape[0],
  );
}
