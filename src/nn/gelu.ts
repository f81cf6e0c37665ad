import erf from "@stdlib/math-base-special-erf";

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
 * max over x of |gelu'(x)| (about 1.12899, reached near x = 1.4185), found by a grid of step
 * 0.01 on [-10, 10] plus golden-section refinement at module load (gelu' is smooth with one
 * maximum there, so the grid's best point brackets it; 60 golden-section steps shrink the
 * bracket to 1e-14, where the flat maximum is exact to rounding). The grid was 1e-3 until it
 * cost about 50 ms of every Node start (`npm run bench -- startup`) and 0.1 s in the explorer's worker on a loaded machine.
 */
export const GELU_DERIVATIVE_MAX: number = (() => {
  const step = 1e-2;
  let best = 0;
  let at = 0;
  for (let x = -10; x <= 10; x += step) {
    const v = Math.abs(geluDerivative(x));
    if (v > best) {
      best = v;
      at = x;
    }
  }
  let lo = at - step;
  let hi = at + step;
  const g = (Math.sqrt(5) - 1) / 2;
  for (let i = 0; i < 60; i++) {
    const a = hi - g * (hi - lo);
    const b = lo + g * (hi - lo);
    if (geluDerivative(a) > geluDerivative(b)) hi = b;
    else lo = a;
  }
  return Math.max(best, geluDerivative((lo + hi) / 2));
})();

/**
 * Exact GELU, x Phi(x) with Phi the standard normal CDF (Hendrycks & Gimpel 2016; what PyTorch's
 * `gelu` and Hugging Face's `hidden_act: "gelu"` compute), in float64:
 *
 *   geluErf(x)  = 0.5 x (1 + erf(x / sqrt 2))
 *   geluErf'(x) = Phi(x) + x phi(x),  phi(x) = exp(-x^2 / 2) / sqrt(2 pi)
 *
 * erf is @stdlib/math-base-special-erf (JavaScript has no Math.erf).
 *
 * @example geluErf(1) // 0.8413447460685429
 */
export function geluErf(x: number): number {
  return 0.5 * x * (1 + erf(x / Math.SQRT2));
}

/** Derivative of the exact GELU at x, Phi(x) + x phi(x), in float64. @example geluErfDerivative(0) // 0.5 */
export function geluErfDerivative(x: number): number {
  return 0.5 * (1 + erf(x / Math.SQRT2)) + (x * Math.exp(-0.5 * x * x)) / Math.sqrt(2 * Math.PI);
}

/**
 * max over x of |geluErf'(x)| in closed form (docs/math.md section 3, "Exact GELU"):
 * geluErf''(x) = phi(x) (2 - x^2), so the derivative is largest at x = sqrt 2, where it is
 * Phi(sqrt 2) + sqrt 2 phi(sqrt 2) = 1.128904..., and smallest at -sqrt 2, where it is
 * 1 - 1.128904... = -0.128904... (act'(-x) = 1 - act'(x)).
 */
export const GELU_ERF_DERIVATIVE_MAX: number = geluErfDerivative(Math.SQRT2);

/** The MLP activations: "gelu-tanh" (the tanh approximation) or "gelu-erf" (exact GELU). */
export const ACTIVATIONS = ["gelu-tanh", "gelu-erf"] as const;

/** One of {@link ACTIVATIONS}. */
export type Activation = (typeof ACTIVATIONS)[number];

/**
 * An activation's float64 derivative and the max of its absolute value over the reals, what
 * the MLP rule needs (docs/math.md section 3).
 *
 * @throws RangeError naming the activation and the known ones when it is not one of them.
 * @example activationDerivative("gelu-erf").max // 1.1289...
 */
export function activationDerivative(name: string): {
  derivative: (x: number) => number;
  max: number;
} {
  if (name === "gelu-tanh") return { derivative: geluDerivative, max: GELU_DERIVATIVE_MAX };
  if (name === "gelu-erf") return { derivative: geluErfDerivative, max: GELU_ERF_DERIVATIVE_MAX };
  throw new RangeError(`activation: expected one of ${ACTIVATIONS.join(", ")}, got "${name}"`);
}
