import { GELU_DERIVATIVE_MAX, geluDerivative } from "../../nn/gelu.ts";
import { symMaxEigenvalue } from "../linalg.ts";

/**
 * Local Lipschitz rule of the row-wise MLP y = act(x W_1 + b_1) W_2 + b_2 (MATH.md section 3;
 * W_1 [d, hidden], W_2 [hidden, d], act = tanh-GELU). Per row the Jacobian (row-vector
 * convention) is W_1 diag(act'(h_row)) W_2; rows do not mix, so the layer's local constant is
 * exactly max_row ||W_1 diag(act'(h_row)) W_2||_2 (MATH.md writes it W_2 diag W_1 in column
 * convention; same norm).
 */

/** Result of {@link mlpBound}. */
export interface MlpBound {
  /** Exact local value max_row ||W_1 diag(act'(h_row)) W_2||_2. */
  local: number;
  /** Relaxed: ||W_1||_2 max_{row, unit} |act'(h)| ||W_2||_2, with the max over this input. */
  relaxed: number;
  /** Input-free: ||W_1||_2 GELU_DERIVATIVE_MAX ||W_2||_2 (about 1.129 ||W_1|| ||W_2||). */
  global: number;
}

/**
 * @param h the pre-activation [n, hidden] (trace `mlpPre`).
 * @param w1 W_1 [d, hidden] row-major; @param w2 W_2 [hidden, d] row-major.
 * @param norms ||W_1||_2 and ||W_2||_2 (computed once per model).
 * @param options.local false skips the O(n d^2 hidden) exact value (then `local` is NaN;
 *   callers must then compose with `relaxed`).
 * @returns {@link MlpBound}.
 * @throws RangeError on size mismatches.
 */
export function mlpBound(
  h: ArrayLike<number>,
  n: number,
  d: number,
  hidden: number,
  w1: ArrayLike<number>,
  w2: ArrayLike<number>,
  norms: { w1: number; w2: number },
  options: { local?: boolean } = {},
): MlpBound {
  if (h.length < n * hidden)
    throw new RangeError(`mlp: h must have n*hidden = ${n * hidden} entries, got ${h.length}`);
  if (w1.length !== d * hidden || w2.length !== hidden * d)
    throw new RangeError(`mlp: W_1 must be [${d}, ${hidden}] and W_2 [${hidden}, ${d}]`);
  let maxDeriv = 0;
  for (let i = 0; i < n * hidden; i++)
    maxDeriv = Math.max(maxDeriv, Math.abs(geluDerivative(h[i])));
  const relaxed = norms.w1 * maxDeriv * norms.w2;
  const global = norms.w1 * GELU_DERIVATIVE_MAX * norms.w2;
  if (options.local === false) return { local: NaN, relaxed, global };
  const g = new Float64Array(hidden);
  const m = new Float64Array(d * d);
  const mmT = new Float64Array(d * d);
  let local = 0;
  for (let r = 0; r < n; r++) {
    for (let u = 0; u < hidden; u++) g[u] = geluDerivative(h[r * hidden + u]);
    m.fill(0);
    for (let a = 0; a < d; a++)
      for (let u = 0; u < hidden; u++) {
        const t = w1[a * hidden + u] * g[u];
        if (t === 0) continue;
        const o = u * d;
        for (let b = 0; b < d; b++) m[a * d + b] += t * w2[o + b];
      }
    for (let a = 0; a < d; a++)
      for (let b = a; b < d; b++) {
        let s = 0;
        for (let c = 0; c < d; c++) s += m[a * d + c] * m[b * d + c];
        mmT[a * d + b] = s;
        mmT[b * d + a] = s;
      }
    local = Math.max(local, Math.sqrt(Math.max(symMaxEigenvalue(mmT, d), 0)));
  }
  return { local, relaxed, global };
}
