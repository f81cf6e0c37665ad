import { tf } from "../../backend.ts";
import { layerNorm } from "../../nn/layerNorm.ts";
import { poolTokens, type Pooling } from "../../nn/pooling.ts";
import { finalNormBound } from "../rules/output.ts";
import { input, setting } from "./view.ts";
import type { LayerKindSpec } from "./types.ts";

/**
 * The final LayerNorm followed by pooling ("cls", "mean" over real tokens, or the "last" real
 * token), [b, n, d] -> [b, d]. Roles gamma, beta [d]; settings eps, pooling. Rule
 * (docs/math.md section 3): the pooled row's LayerNorm factor (cls, last) or the max real-row
 * factor / sqrt(real rows) (mean).
 */
export const finalNormKind: LayerKindSpec<Float64Array> = {
  kind: "finalNorm",
  params: { required: ["gamma", "beta"] },
  forward: (x, ctx) =>
    tf.tidy(() => ({
      out: poolTokens(
        layerNorm(
          x,
          ctx.params.gamma,
          ctx.params.beta,
          setting(ctx.settings, "eps", "finalNorm") as number,
        ),
        setting(ctx.settings, "pooling", "finalNorm") as Pooling,
        ctx.mask,
      ),
    })),
  prepare: (params) => Float64Array.from(params.gamma.data),
  rule(layer) {
    const x = input(layer);
    const [n, d] = x.shape;
    return {
      value: finalNormBound(
        x.data,
        n,
        d,
        layer.prepared,
        setting(layer.settings, "eps", layer.name) as number,
        setting(layer.settings, "pooling", layer.name) as Pooling,
        layer.mask.real,
      ),
    };
  },
};
