/**
 * The principal branch W_0 of the Lambert W function, w e^w = x, for x >= 0, in float64.
 *
 * Hand-written (Halley's and Newton's iterations, about 25 lines) rather than a dependency: @stdlib, whose
 * packages attnlip already uses, has no Lambert W, and one function does not justify another
 * package. Used by Kim et al.'s bound (kim.ts), phi^{-1}(N - 1) = W_0((N - 1) / e).
 *
 * For x <= e: start at log1p(x) (W_0 <= log1p(x) there) and take Halley steps on
 * f(w) = w e^w - x,  w <- w - f / (f' - f f'' / (2 f')), f' = e^w (w + 1), f'' = e^w (w + 2)
 * (cubic convergence). For x > e, where w e^w may overflow: start at L - log(L), L = log(x) (the
 * asymptotic form), and take Newton steps on g(w) = w + log(w) - log(x) (the same equation in
 * logs; g is increasing and concave, so the steps converge quadratically). Stopped when a step is
 * below 4 ulp of w (at most 64 steps).
 *
 * @param x >= 0 and finite.
 * @returns W_0(x) >= 0 (0 at x = 0, 1 at x = e, about log x - log log x for large x).
 * @throws RangeError naming `x` when it is negative, NaN or not finite.
 * @example lambertW0(Math.E) // 1
 */
export function lambertW0(x: number): number {
  if (!(x >= 0) || !Number.isFinite(x))
    throw new RangeError(`lambertW0: x must be finite and >= 0, got ${x}`);
  if (x === 0) return 0;
  const small = x <= Math.E;
  let w = small ? Math.log1p(x) : Math.log(x) - Math.log(Math.log(x));
  const logX = Math.log(x);
  for (let k = 0; k < 64; k++) {
    let step: number;
    if (small) {
      const ew = Math.exp(w);
      const f = w * ew - x;
      const fp = ew * (w + 1);
      step = f / (fp - (f * ew * (w + 2)) / (2 * fp));
    } else step = (w + Math.log(w) - logX) / (1 + 1 / w);
    w -= step;
    if (Math.abs(step) <= 4 * Number.EPSILON * Math.max(Math.abs(w), Number.MIN_VALUE)) break;
  }
  return w;
}
