import type { DotBoundVariant } from "./registry.ts";

/**
 * The row-resolved variants (docs/math.md section 2): the value path ||P|| ||W_V||, the key path
 * ||diag(s) Q W_K^T|| ||V_c|| / sqrt(d_k), and the query path either relaxed per row (`dist`:
 * max_i s_i ||W_Q K_c^T|| ||V_c|| / sqrt(d_k)) or exact (`cov`: max_i ||W_Q K_c^T J_i V_c|| /
 * sqrt(d_k), O(n^2 d_k^2) per head).
 */
export const ROW_RESOLVED_VARIANTS: DotBoundVariant[] = [
  {
    name: "dist",
    kind: "dot",
    family: "distribution-aware",
    note: "row-resolved refinement of the distribution-aware bound",
    math: "2. One attention head",
    colour: "#b279a2",
    needs: [],
    compute: (q) => q.valuePath + q.queryPathRelaxed + q.keyPath,
  },
  {
    name: "cov",
    kind: "dot",
    family: "distribution-aware",
    note: "row-resolved refinement through the covariance of the values",
    math: "2. One attention head",
    colour: "#ff9da6",
    summary: true,
    needs: ["queryPathExact"],
    compute: (q) => q.valuePath + q.queryPathExact + q.keyPath,
  },
];
