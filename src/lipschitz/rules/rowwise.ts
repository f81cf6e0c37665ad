import { belowCertified, gramRowsInto, matMulInto, symMaxEigenvalue } from "../linalg.ts";

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

/**
 * A row Jacobian (d x d, row-major, row-vector convention dy = dx J), with products by it
 * where its structure makes them cheaper than a dense d^3 product (LayerNorm: O(d^2)).
 */
export interface RowJacobian {
  d: number;
  /** The dense matrix. */
  matrix(): Float64Array;
  /** J M for M [d, c] (c = m.length / d; absent: dense product). */
  leftTimes?(m: Float32Array | Float64Array): Float64Array;
  /** M J for M [d, d] (absent: dense product). */
  rightTimes?(m: Float64Array): Float64Array;
  /**
   * Present on a LayerNorm row: J = (1/s) P diag(gamma), P = I - 1 1^T/d - z z^T/d, so Gram
   * matrices (J W)^T (J W) follow from weight-only ones (src/lipschitz/rules/preRowwise.ts).
   */
  layerNorm?: { z: Float64Array; gamma: ArrayLike<number>; s: number };
}

/** A dense row Jacobian. */
export function denseRowJacobian(m: Float64Array, d: number): RowJacobian {
  return { d, matrix: () => m };
}

function product(a: Float64Array, b: Float64Array, d: number): Float64Array {
  const out = new Float64Array(d * d);
  matMulInto(a, b, out, d, d, d);
  return out;
}

/**
 * J M for a row Jacobian J [d, d] and M [d, c] (c = m.length / d), through J's structured
 * product where it has one (LayerNorm: O(d c)), else densely.
 *
 * @throws RangeError when m.length is not a multiple of d.
 * @example rowTimes(layerNormRowJacobian(x, gamma, 1e-5), wq).length // d * d
 */
export function rowTimes(j: RowJacobian, m: Float32Array | Float64Array): Float64Array {
  const { d } = j;
  if (m.length % d !== 0)
    throw new RangeError(`rowTimes: expected a [${d}, c] matrix, got ${m.length} entries`);
  if (j.leftTimes) return j.leftTimes(m);
  const cols = m.length / d;
  const out = new Float64Array(d * cols);
  matMulInto(j.matrix(), m, out, d, d, cols);
  return out;
}

/**
 * The product J_1 J_2 ... of the children's row Jacobians at `row` (forward order), or null when
 * a child is not row-wise. It starts from the first child without structured products and
 * multiplies the others onto it from the right, then from the left, so that LayerNorms cost
 * O(d^2) each.
 */
export function chainRowJacobian(
  children: readonly { rowJacobian(row: number): RowJacobian | null }[],
  row: number,
): RowJacobian | null {
  const js: RowJacobian[] = [];
  for (const child of children) {
    const j = child.rowJacobian(row);
    if (j === null) return null;
    js.push(j);
  }
  if (js.length === 0) return null;
  if (js.length === 1) return js[0];
  const d = js[0].d;
  let k = js.findIndex((j) => !j.leftTimes || !j.rightTimes);
  if (k < 0) k = 0;
  let out = js[k].matrix();
  for (let c = k + 1; c < js.length; c++)
    out = js[c].rightTimes ? js[c].rightTimes!(out) : product(out, js[c].matrix(), d);
  for (let c = k - 1; c >= 0; c--)
    out = js[c].leftTimes ? js[c].leftTimes!(out) : product(js[c].matrix(), out, d);
  return denseRowJacobian(out, d);
}

/**
 * max over the rows of ||J_i||_2 for a row-wise entry: its exact local value (float64). As the
 * MLP rule does (rules/mlp.ts), a row whose J J^T is certified below the running maximum (an
 * LDL^T of c I - J J^T with positive pivots) skips the eigenvalue computation: the result is
 * the same maximum.
 *
 * @param jacobian the entry's row Jacobian (d x d, dense) at a row.
 * @param n rows. @param d row width.
 * @example rowwiseValue((i) => rowJacobians[i], 17, 64)
 */
export function rowwiseValue(
  jacobian: (row: number) => Float64Array,
  n: number,
  d: number,
): number {
  const gram = new Float64Array(d * d);
  const work = new Float64Array(d * d);
  let best = 0; // running max of lambda_max(J J^T)
  let any = false;
  for (let i = 0; i < n; i++) {
    gramRowsInto(jacobian(i), d, gram);
    // The certificate's own rounding is covered by testing against a slightly smaller c (as rules/mlp.ts).
    if (any && belowCertified(gram, d, best * (1 - 4 * d * (d + 1) * Number.EPSILON), work))
      continue;
    best = Math.max(best, symMaxEigenvalue(gram, d));
    any = true;
  }
  return Math.sqrt(Math.max(best, 0));
}

/**
 * One LayerNorm row's Jacobian (row-vector convention, d x d): J[a][b] = dy_b / dx_a =
 * (gamma_b / s) (delta_ab - 1/d - z_a z_b / d) = (1/s) (P diag(gamma))[a][b], with
 * s = sqrt(var + eps), z = (x - mean) / s and P = I - 1 1^T/d - z z^T/d symmetric
 * (docs/math.md section 3, LayerNorm). Products with it cost O(d^2):
 * J M = (1/s) P (diag(gamma) M) (M [d, c]), M J = (1/s) (M P) diag(gamma), with P Y = Y - 1 (1^T Y)/d - z (z^T Y)/d.
 *
 * @param x the row [d]; @param gamma [d]; @param eps LayerNorm epsilon.
 * @example layerNormRowJacobian([1, -1], [1, 1], 0).matrix() // zeros: a 2-entry row normalises to +-1 whatever its scale
 */
export function layerNormRowJacobian(
  x: ArrayLike<number>,
  gamma: ArrayLike<number>,
  eps: number,
): RowJacobian {
  const d = x.length;
  let mean = 0;
  for (let a = 0; a < d; a++) mean += x[a];
  mean /= d;
  let v = 0;
  for (let a = 0; a < d; a++) v += (x[a] - mean) ** 2;
  const s = Math.sqrt(v / d + eps);
  const z = Float64Array.from(x, (t) => (t - mean) / s);
  // P Y for Y [d, c]: subtract the column means and the z-projection of each column.
  const projectColumns = (y: Float64Array, c: number) => {
    const colSum = new Float64Array(c);
    const colZ = new Float64Array(c);
    for (let a = 0; a < d; a++)
      for (let b = 0; b < c; b++) {
        colSum[b] += y[a * c + b];
        colZ[b] += z[a] * y[a * c + b];
      }
    for (let a = 0; a < d; a++)
      for (let b = 0; b < c; b++) y[a * c + b] -= (colSum[b] + z[a] * colZ[b]) / d;
    return y;
  };
  // Y P for Y [d, d]: the same on the rows (P is symmetric).
  const projectRows = (y: Float64Array) => {
    for (let a = 0; a < d; a++) {
      let sum = 0;
      let dotZ = 0;
      for (let b = 0; b < d; b++) {
        sum += y[a * d + b];
        dotZ += y[a * d + b] * z[b];
      }
      for (let b = 0; b < d; b++) y[a * d + b] -= (sum + dotZ * z[b]) / d;
    }
    return y;
  };
  return {
    d,
    layerNorm: { z, gamma, s },
    matrix() {
      const j = new Float64Array(d * d);
      for (let a = 0; a < d; a++)
        for (let b = 0; b < d; b++)
          j[a * d + b] = (gamma[b] / s) * ((a === b ? 1 : 0) - 1 / d - (z[a] * z[b]) / d);
      return j;
    },
    leftTimes(m) {
      // (1/s) P diag(gamma) M for M [d, c]: scale row a of M by gamma_a / s, then project the columns.
      const c = m.length / d;
      const y = new Float64Array(d * c);
      for (let a = 0; a < d; a++)
        for (let b = 0; b < c; b++) y[a * c + b] = (m[a * c + b] * gamma[a]) / s;
      return projectColumns(y, c);
    },
    rightTimes(m) {
      // (1/s) (M P) diag(gamma): project the rows of M, then scale column b by gamma_b / s.
      const y = projectRows(Float64Array.from(m));
      for (let a = 0; a < d; a++) for (let b = 0; b < d; b++) y[a * d + b] *= gamma[b] / s;
      return y;
    },
  };
}

/**
 * One MLP row's Jacobian W_1 diag(act'(h)) W_2 (row-vector convention, d x d).
 *
 * @param g act'(h) of the row [hidden]; @param w1 [d, hidden]; @param w2 [hidden, d] (row-major).
 * @example mlpRowJacobian(g, w1, w2, 64, 128).matrix().length // 4096
 */
export function mlpRowJacobian(
  g: ArrayLike<number>,
  w1: Float64Array,
  w2: Float64Array,
  d: number,
  hidden: number,
): RowJacobian {
  const w1g = new Float64Array(d * hidden);
  for (let a = 0; a < d; a++)
    for (let u = 0; u < hidden; u++) w1g[a * hidden + u] = w1[a * hidden + u] * g[u];
  const m = new Float64Array(d * d);
  matMulInto(w1g, w2, m, d, hidden, d);
  return denseRowJacobian(m, d);
}

/** I + J for a residual's row Jacobian. */
export function plusIdentity(j: RowJacobian): RowJacobian {
  const out = Float64Array.from(j.matrix());
  for (let a = 0; a < j.d; a++) out[a * j.d + a] += 1;
  return denseRowJacobian(out, j.d);
}
