import type { L2BoundVariant } from "./registry.ts";

/**
 * Why dot-product attention has no `l2-dist` or `l2-cov` value: the message of the InputError its
 * rules throw when one is asked for (prefixed by the layer's name).
 */
export const L2_LOCAL_DOT_REFUSED =
  'variants "l2-dist" and "l2-cov" bound L2 attention only: their score paths are derived for the scores -||q_i - q_j||^2 / sqrt(d_k) with tied queries and keys (docs/math.md section 2, "Local bounds of L2 attention"); for dot-product attention ask for its own variants (dist, cov, fused, ...)';

/**
 * The local variants of L2 self-attention (docs/math.md section 2, "Local bounds of L2
 * attention"; rules/l2Head.ts): value path + query path + key path, with each row's sigma and
 * norms (`l2-dist`) or the query path exact and the key path the smallest of the row-exact forms
 * (`l2-cov`, O(n^2 d_k^2) per head).
 */
export const L2_DIST_COV_VARIANTS: L2BoundVariant[] = [
  {
    name: "l2-dist",
    kind: "l2",
    family: "distribution-aware",
    note: "L2 attention only: local bound at the input, each row's sigma and norms (docs/math.md section 2, Local bounds of L2 attention)",
    math: "Local bounds of L2 attention",
    colour: "#17becf",
    summary: true,
    needs: [],
    compute: (q) => q.valuePath + q.queryDist + q.keyDist,
    dotRefusal: L2_LOCAL_DOT_REFUSED,
  },
  {
    name: "l2-cov",
    kind: "l2",
    family: "distribution-aware",
    note: "L2 attention only: local bound at the input, each row's query path exact (covariance of the queries under the row's attention)",
    math: "Local bounds of L2 attention",
    colour: "#8c564b",
    summary: true,
    needs: ["rowExact"],
    compute: (q) => q.valuePath + q.queryCov + q.keyCov,
    dotRefusal: L2_LOCAL_DOT_REFUSED,
  },
];
