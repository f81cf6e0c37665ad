import type { DotBoundVariant } from "./registry.ts";

/**
 * `castin` (docs/math.md section 2): the prior-art bound over the ball of token norm R (Castin,
 * Ablin, Peyre, ICML 2024), sqrt 3 ||W_V|| (||A||^2 R^4 (4n + 1) + n)^(1/2), R = max_i ||x_i||; a
 * head with a query bias through input augmentation.
 */
export const CASTIN_VARIANT: DotBoundVariant = {
  name: "castin",
  kind: "dot",
  family: "prior art",
  note: "prior art: a ball bound (Castin et al.)",
  math: "2. One attention head",
  colour: "#bab0ac",
  needs: [],
  compute: (q) => Math.sqrt(3) * q.wv * Math.sqrt(q.a * q.a * q.r ** 4 * (4 * q.n + 1) + q.n),
};
