import { spectralNorm } from "../linalg.ts";

/**
 * Local Lipschitz rule of BERT's pooler y = tanh(x W + b) on one pooled vector x [d]
 * (docs/math.md section 3, "Pooler"). In the row-vector convention its Jacobian is
 * W diag(s) with s_j = tanh'(z_j) = 1 - tanh(z_j)^2 in (0, 1], z = x W + b; its norm is the
 * exact local value. Since 0 < s_j <= 1, ||W diag(s)||_2 <= ||W||_2, the relaxed value
 * (the pooler's global Lipschitz constant).
 */

/** Result of {@link poolerBound}. */
export interface PoolerBound {
  /** Exact local value ||W diag(1 - tanh^2(x W + b))||_2 (float64). */
  local: number;
  /** ||W||_2: a bound at every input. */
  relaxed: number;
}

/**
 * @param x the pooled vector [d] (the pooler's input at one example).
 * @param w W [d, out] row-major; @param b [out].
 * @param wNorm ||W||_2 when already known (computed otherwise).
 * @returns {@link PoolerBound}.
 * @throws RangeError on size mismatches.
 * @example poolerBound([0, 0], [2, 0, 0, 1], [0, 0]).local // 2 (tanh'(0) = 1)
 */
export function poolerBound(
  x: ArrayLike<number>,
  w: ArrayLike<number>,
  b: ArrayLike<number>,
  wNorm?: number,
): PoolerBound {
  const d = x.length;
  const out = b.length;
  if (w.length !== d * out)
    throw new RangeError(`pooler: W must be [${d}, ${out}], got ${w.length} entries`);
  const scaled = new Float64Array(d * out);
  for (let j = 0; j < out; j++) {
    let z = b[j];
    for (let i = 0; i < d; i++) z += x[i] * w[i * out + j];
    const t = Math.tanh(z);
    const s = 1 - t * t;
    for (let i = 0; i < d; i++) scaled[i * out + j] = w[i * out + j] * s;
  }
  return { local: spectralNorm(scaled, d, out), relaxed: wNorm ?? spectralNorm(w, d, out) };
}
