import { NonFiniteError } from "../util/errors.ts";

/**
 * Power-of-two scaling for the float64 helpers of linalg.ts and maxEigenvalue.ts.
 *
 * Squaring is where float64 breaks first: an entry below about 1e-154 squares to 0 (or to a
 * subnormal that has lost its digits) and one above about 1e154 squares to Infinity. Every
 * norm, Gram matrix and eigenvalue helper there therefore first divides its input by a power
 * of two near its largest magnitude (as LAPACK's dnrm2 scales), works on entries of size about
 * 1, and multiplies the result back. Powers of two are exact in binary floating point, so for
 * inputs that never came near the limits the results are the same to the last bit (the Gram
 * and eigenvalue paths skip the scaling when the largest magnitude is within 2^+-400, where it
 * would change nothing).
 */

/**
 * Largest |entry| of the first `count` entries of a (0 when empty).
 *
 * @param name the caller, in the error.
 * @throws NonFiniteError (a RangeError) on a non-finite entry.
 * @example maxAbs([1, -3, 2], 3, "me") // 3
 */
export function maxAbs(a: ArrayLike<number>, count: number, name: string): number {
  let m = 0;
  for (let i = 0; i < count; i++) {
    const v = Math.abs(a[i]);
    if (!(v <= Number.MAX_VALUE))
      throw new NonFiniteError(
        `${name}: non-finite entry ${a[i]} at ${i} (the model's values overflow: weights or inputs far too large?)`,
      );
    if (v > m) m = v;
  }
  return m;
}

/**
 * The power-of-two exponent e with 2^e <= m < 2^(e+1) for finite m > 0 (subnormals included),
 * so that m * 2^-e lies in [1, 2).
 *
 * @example exponentOf(3) // 1; exponentOf(1e-310) // -1030
 */
export function exponentOf(m: number): number {
  let e = Math.floor(Math.log2(m));
  // Math.log2 may round across a power of two; correct by one step either way.
  if (times2(m, -e) >= 2) e++;
  else if (times2(m, -e) < 1) e--;
  return e;
}

/**
 * x * 2^e without overflow or underflow of the factor itself: 2^e alone is not representable
 * for e > 1023 or e < -1074, so the factor is applied in two halves (each exact).
 *
 * @example times2(3, 2) // 12; times2(1e300, -2000) // 1e300 * 2^-2000, no 0 * Infinity
 */
export function times2(x: number, e: number): number {
  if (e >= -1022 && e <= 1023) return x * 2 ** e;
  const half = Math.trunc(e / 2);
  return x * 2 ** half * 2 ** (e - half);
}
