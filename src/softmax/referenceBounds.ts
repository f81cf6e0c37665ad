import { rowStats } from "./rowStats.ts";

/**
 * Classical upper bounds on sigma(p) = ||diag(p) - p p^T||_2, kept to compare the exact
 * value and the closed forms against (docs/math.md section 1). All are valid for any row on
 * the simplex:
 * - `half`: 1/2, the tight global constant (arXiv:2510.23012);
 * - `one`: 1, the classical softmax Lipschitz constant;
 * - `top1`: p_(1), from eigenvalue interlacing;
 * - `gershgorin`: 2 max_i p_i (1 - p_i), Gershgorin discs of J(p);
 * - `trace`: 1 - ||p||^2 = trace J(p), since J(p) is positive semidefinite.
 * 1 - p_i is computed as the sum of the other entries, so near one-hot rows keep digits.
 */
export interface ReferenceBounds {
  top1: number;
  gershgorin: number;
  trace: number;
  half: number;
  one: number;
}

/** @param p a probability row (entries >= 0); returns every bound of {@link ReferenceBounds}. */
export function referenceBounds(p: ArrayLike<number>): ReferenceBounds {
  const st = rowStats(p);
  const total = st.a + st.r;
  let gershgorin = 0;
  let trace = 0;
  for (let i = 0; i < p.length; i++) {
    const v = p[i];
    if (!(v > 0)) continue;
    const others = i === st.topIndex ? st.r : total - v;
    const term = v * others;
    trace += term;
    if (2 * term > gershgorin) gershgorin = 2 * term;
  }
  return { top1: st.a, gershgorin, trace, half: 0.5, one: 1 };
}
