import { EigenvalueDecomposition, Matrix } from "ml-matrix";

/**
 * Test oracle: lambda_max of J(p) = diag(p) - p p^T from ml-matrix's dense symmetric
 * eigensolver. The diagonal p_i (1 - p_i) is built with 1 - p_i as the sum of the other
 * entries, so that the oracle describes the same point of the simplex as the row's
 * off-top entries (near one-hot rows would otherwise lose every digit).
 */
export function denseSigma(p: ArrayLike<number>): number {
  const n = p.length;
  if (n === 0) return 0;
  let total = 0;
  for (let i = 0; i < n; i++) total += p[i];
  let top = 0;
  for (let i = 1; i < n; i++) if (p[i] > p[top]) top = i;
  const restOfTop = total - p[top] === 0 ? 0 : sumExcept(p, top);
  const m = new Matrix(n, n);
  for (let i = 0; i < n; i++) {
    const others = i === top ? restOfTop : total - p[i];
    for (let j = 0; j < n; j++) m.set(i, j, i === j ? p[i] * others : -p[i] * p[j]);
  }
  const values = new EigenvalueDecomposition(m, { assumeSymmetric: true }).realEigenvalues;
  return Math.max(0, ...values);
}

function sumExcept(p: ArrayLike<number>, skip: number): number {
  let s = 0;
  for (let i = 0; i < p.length; i++) if (i !== skip) s += p[i];
  return s;
}
