/**
 * Small dense linear algebra in float64 for the true values: eigenvalues of a symmetric matrix
 * (cyclic Jacobi) and the spectral norm of a dense matrix through its smaller Gram matrix.
 *
 * Why a plain routine and no library: the matrices here are C x C Gram matrices (C = number of
 * classes, 2 or 10) or the Gram matrix of a small test-oracle Jacobian (at most a few hundred
 * rows); cyclic Jacobi is accurate to rounding for symmetric matrices and about 40 lines.
 * ml-matrix is a devDependency of this package, so src/ must not import it.
 */

/**
 * Eigenvalues of a symmetric n x n matrix by the cyclic Jacobi method, in float64.
 *
 * @param a row-major n x n entries (only read; symmetry is assumed, the upper triangle wins).
 * @param n the order; a.length must be n * n.
 * @returns the n eigenvalues in descending order.
 * @throws RangeError when a.length !== n * n; Error when an entry is not finite.
 */
export function symmetricEigenvalues(a: ArrayLike<number>, n: number): Float64Array {
  if (!Number.isInteger(n) || n < 0 || a.length !== n * n)
    throw new RangeError(`symmetricEigenvalues: expected ${n} x ${n} entries, got ${a.length}`);
  const m = new Float64Array(n * n);
  for (let i = 0; i < n; i++)
    for (let j = i; j < n; j++) {
      const v = a[i * n + j];
      if (!Number.isFinite(v)) throw new Error(`symmetricEigenvalues: entry (${i}, ${j}) is ${v}`);
      m[i * n + j] = v;
      m[j * n + i] = v;
    }
  for (let sweep = 0; sweep < 100; sweep++) {
    let off = 0;
    let total = 0;
    for (let i = 0; i < n; i++)
      for (let j = 0; j < n; j++) {
        const v = m[i * n + j] * m[i * n + j];
        total += v;
        if (i !== j) off += v;
      }
    if (off <= 1e-30 * total || off === 0) break;
    for (let p = 0; p < n - 1; p++)
      for (let q = p + 1; q < n; q++) {
        const apq = m[p * n + q];
        if (apq === 0) continue;
        const app = m[p * n + p];
        const aqq = m[q * n + q];
        const theta = (aqq - app) / (2 * apq);
        const t = Math.sign(theta || 1) / (Math.abs(theta) + Math.sqrt(theta * theta + 1));
        const c = 1 / Math.sqrt(t * t + 1);
        const s = t * c;
        for (let k = 0; k < n; k++) {
          const akp = m[k * n + p];
          const akq = m[k * n + q];
          m[k * n + p] = c * akp - s * akq;
          m[k * n + q] = s * akp + c * akq;
        }
        for (let k = 0; k < n; k++) {
          const apk = m[p * n + k];
          const aqk = m[q * n + k];
          m[p * n + k] = c * apk - s * aqk;
          m[q * n + k] = s * apk + c * aqk;
        }
      }
  }
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) out[i] = m[i * n + i];
  return out.sort().reverse();
}

/**
 * Spectral norm (largest singular value) of a dense rows x cols matrix, in float64: the square
 * root of the largest eigenvalue of the smaller Gram matrix (A A^T or A^T A).
 *
 * @param data row-major rows x cols entries.
 * @returns ||A||_2 >= 0 (0 for an empty matrix).
 * @throws RangeError when data.length !== rows * cols; Error on a non-finite entry.
 */
export function spectralNorm(data: ArrayLike<number>, rows: number, cols: number): number {
  if (data.length !== rows * cols)
    throw new RangeError(`spectralNorm: expected ${rows} x ${cols} entries, got ${data.length}`);
  if (rows === 0 || cols === 0) return 0;
  const byRows = rows <= cols;
  const k = byRows ? rows : cols;
  const at = byRows
    ? (i: number, l: number) => data[i * cols + l]
    : (i: number, l: number) => data[l * cols + i];
  const inner = byRows ? cols : rows;
  const gram = new Float64Array(k * k);
  for (let i = 0; i < k; i++)
    for (let j = i; j < k; j++) {
      let s = 0;
      for (let l = 0; l < inner; l++) s += at(i, l) * at(j, l);
      gram[i * k + j] = s;
      gram[j * k + i] = s;
    }
  const top = symmetricEigenvalues(gram, k)[0];
  return Math.sqrt(Math.max(top, 0));
}
