/**
 * GELU in its tanh approximation (Hendrycks & Gimpel 2016, eq. for "0.5x(1 + tanh[...])", the
 * form GPT-2 and BERT's TF code use), as plain float64 functions for the bound rules
 * (docs/math.md section 3 needs act'(h)). The tensor version is in mlp.ts.
 *
 *   gelu(x)  = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
 *   gelu'(x) = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
 */

/** sqrt(2 / pi). */
export const GELU_C = Math.sqrt(2 / Math.PI);
/** Cubic coefficient of the tanh approximation. */
export const GELU_A = 0.044715;

/** GELU (tanh approximation) of one float64. */
export function gelu(x: number): number {
  return 0.5 * x * (1 + Math.tanh(GELU_C * (x + GELU_A * x * x * x)));
}

/** Derivative of the tanh-approximation GELU at x, in float64. */
export function geluDerivative(x: number): number {
  const t = Math.tanh(GELU_C * (x + GELU_A * x * x * x));
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * GELU_C * (1 + 3 * GELU_A * x * x);
}

/**
 * max over x of |gelu'(x)| (about 1.1289, reached near x = 2.12), found by a dense grid plus
 * golden-section refinement at module load.
 */
export const GELU_DERIVATIVE_MAX: number = (() => {
  let best = 0;
  let at = 0;
  for (let x = -10; x <= 10; x += 1e-3) {
    const v = Math.abs(geluDerivative(x));
    if (v > best) [best, at] = [v, x];
  }
  let lo = at - 1e-3;
  let hi = at + 1e-3;
  const g = (Math.sqrt(5) - 1) / 2;
  for (let i = 0; i < 60; i++) {
    const a = hi - g * (hi - lo);
    const b = lo + g * (hi - lo);
    if (geluDerivative(a) > geluDerivative(b)) hi = b;
    else lo = a;
  }
  return Math.max(best, geluDerivative((lo + hi) / 2));
})();
