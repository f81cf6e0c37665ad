import { spectralNorm } from "../linalg.ts";
import type { LayerView } from "../layers/types.ts";

/**
 * Row-wise runs (docs/math.md section 3, "Row-wise runs"). A layer is row-wise when it maps each
 * token's row on its own (LayerNorm, the MLP); residuals and sequences of row-wise layers are
 * row-wise too. The Jacobian of a row-wise map F(X)_i = f_i(x_i) is block diagonal with the row
 * Jacobians J_i, so its spectral norm is exactly max_i ||J_i||, and the row Jacobians compose
 * exactly: J_i = I + J_g,i for x + g(x), J_f,i J_g,i for g after f (row-vector convention).
 * Bounding such a run by this maximum, instead of multiplying each layer's own maximum (which
 * may come from different rows, and ignores the identity's direction in a residual), is exact
 * at the point and never above the product.
 */

/** The number of rows of a traced layer's input ([n, d] -> n). @throws RangeError without input. */
export function rowsOf(view: LayerView): number {
  if (view.input === null) throw new RangeError(`${view.name}: the trace holds no input`);
  return view.input.shape[0];
}

/** c = a b for d x d matrices (row-major). */
export function matMul(a: Float64Array, b: Float64Array, d: number): Float64Array {
  const c = new Float64Array(d * d);
  for (let i = 0; i < d; i++)
    for (let k = 0; k < d; k++) {
      const aik = a[i * d + k];
      if (aik === 0) continue;
      for (let j = 0; j < d; j++) c[i * d + j] += aik * b[k * d + j];
    }
  return c;
}

/**
 * The product J_1 J_2 ... of the children's row Jacobians at `row` (forward order), or null when
 * a child is not row-wise.
 */
export function chainRowJacobian(children: readonly LayerView[], row: number): Float64Array | null {
  let out: Float64Array | null = null;
  let d = 0;
  for (const child of children) {
    const j = child.rowJacobian(row);
    if (j === null) return null;
    if (out === null) {
      out = j;
      d = Math.round(Math.sqrt(j.length));
    } else out = matMul(out, j, d);
  }
  return out;
}

/**
 * max over the rows of ||J_i||_2 for a row-wise entry: its exact local value (float64).
 *
 * @param jacobian the entry's row Jacobian (d x d) at a row.
 * @param n rows. @param d row width.
 * @example rowwiseValue((i) => rowJacobian(view, i)!, 17, 64)
 */
export function rowwiseValue(jacobian: (row: number) => Float64Array, n: number, d: number): number {
  let best = 0;
  for (let i = 0; i < n; i++) best = Math.max(best, spectralNorm(jacobian(i), d, d));
  return best;
}

/**
 * One LayerNorm row's Jacobian (row-vector convention, d x d): J[a][b] = dy_b / dx_a =
 * (gamma_b / s) (delta_ab - 1/d - z_a z_b / d), s = sqrt(var + eps), z = (x - mean) / s
 * (docs/math.md section 3, LayerNorm).
 *
 * @param x the row [d]; @param gamma [d]; @param eps LayerNorm epsilon.
 * @example layerNormRowJacobian([1, -1], [1, 1], 0) // [[0, 0], [0, 0]] (a 2-entry row normalises to +-1 whatever its scale)
 */
export function layerNormRowJacobian(x: ArrayLike<number>, gamma: ArrayLike<number>, eps: number): Float64Array {
  const d = x.length;
  let mean = 0;
  for (let a = 0; a < d; a++) mean += x[a];
  mean /= d;
  let v = 0;
  for (let a = 0; a < d; a++) v += (x[a] - mean) ** 2;
  const s = Math.sqrt(v / d + eps);
  const z = Float64Array.from(x, (t) => (t - mean) / s);
  const j = new Float64Array(d * d);
  for (let a = 0; a < d; a++)
    for (let b = 0; b < d; b++) j[a * d + b] = (gamma[b] / s) * ((a === b ? 1 : 0) - 1 / d - (z[a] * z[b]) / d);
  return j;
}

/**
 * One MLP row's Jacobian W_1 diag(act'(h)) W_2 (row-vector convention, d x d).
 *
 * @param g act'(h) of the row [hidden]; @param w1 [d, hidden]; @param w2 [hidden, d] (row-major).
 */
export function mlpRowJacobian(g: ArrayLike<number>, w1: Float64Array, w2: Float64Array, d: number, hidden: number): Float64Array {
  const j = new Float64Array(d * d);
  for (let a = 0; a < d; a++)
    for (let u = 0; u < hidden; u++) {
      const c = w1[a * hidden + u] * g[u];
      if (c === 0) continue;
      const row = u * d;
      for (let b = 0; b < d; b++) j[a * d + b] += c * w2[row + b];
    }
  return j;
}

/** I + m for a d x d matrix (a residual's row Jacobian). */
export function plusIdentity(m: Float64Array, d: number): Float64Array {
  const out = Float64Array.from(m);
  for (let a = 0; a < d; a++) out[a * d + a] += 1;
  return out;
}
