import type { DotBoundVariant } from "./registry.ts";

/**
 * `paper`: the seed paper's Theorem-3 form as transcribed (docs/math.md section 2),
 * ||W_V|| (||P|| + 2 ||X||^2 ||A|| max_i sigma_top2(P_i)), A = W_Q W_K^T / sqrt(d_k); a head with
 * a query bias through input augmentation (||[X, 1]||, ||A~||).
 */
export const PAPER_VARIANT: DotBoundVariant = {
  name: "paper",
  kind: "dot",
  family: "paper",
  note: "the seed paper's form of the distribution-aware bound",
  math: "2. One attention head",
  colour: "#4c78a8",
  summary: true,
  needs: ["inputNorms"],
  compute: (q) => q.wv * (q.p + 2 * q.x * q.x * q.a * q.sMax.top2),
};
