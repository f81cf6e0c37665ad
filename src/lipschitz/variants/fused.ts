import type { DotBoundVariant } from "./registry.ts";

/** The name of the variant that takes row-wise maps around the head (layers/attention.ts). */
export const FUSED = "fused";

/**
 * `fused` (docs/math.md section 2): `cov` resolved by token on every path, with a row-wise map
 * before the head (a pre-LN block's LayerNorm) and output-row weights after it folded into the
 * paths (rules/fusedPaths.ts). Without a map it is at most `cov` (the same value and query
 * paths, a key path at most `cov`'s); the min keeps it so in rounding when `cov`'s exact query
 * path was computed too.
 */
export const FUSED_VARIANT: DotBoundVariant = {
  name: FUSED,
  kind: "dot",
  family: "distribution-aware",
  note: "cov resolved by token on every path, with a pre-LN block's LayerNorm fused into the attention's token weights",
  math: "2. One attention head",
  colour: "#9d755d",
  summary: true,
  needs: ["fusedPaths"],
  compute(q) {
    const sum = q.fusedValuePath + q.fusedQueryPath + q.fusedKeyPath;
    return !q.mapped && q.computed.has("queryPathExact")
      ? Math.min(sum, q.valuePath + q.queryPathExact + q.keyPath)
      : sum;
  },
};
