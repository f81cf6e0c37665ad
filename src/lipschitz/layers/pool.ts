import { poolTokens, type Pooling } from "../../nn/pooling.ts";
import { poolBound } from "../rules/output.ts";
import { input, setting } from "./view.ts";
import type { LayerKindSpec } from "./types.ts";

/**
 * Pooling without a final LayerNorm (BERT's encoder ends with its blocks' LayerNorm), [b, n, d]
 * -> [b, d]: "cls", "mean" over real tokens, or "last" real token. No parameters; setting
 * pooling. Rule (docs/math.md section 3, "Pooling"): exactly 1 for cls and last, 1/sqrt(m) for
 * the mean of m real rows.
 */
export const poolKind: LayerKindSpec = {
  kind: "pool",
  params: { required: [] },
  forward: (x, ctx) => ({
    out: poolTokens(x, setting(ctx.settings, "pooling", "pool") as Pooling, ctx.mask),
  }),
  rule(layer) {
    const [n] = input(layer).shape;
    return {
      value: poolBound(
        n,
        setting(layer.settings, "pooling", layer.name) as Pooling,
        layer.mask.real,
      ),
    };
  },
};
