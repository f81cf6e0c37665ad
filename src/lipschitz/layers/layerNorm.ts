import { layerNorm } from "../../nn/layerNorm.ts";
import { layerNormBound } from "../rules/layerNorm.ts";
import { layerNormRowJacobian } from "../rules/rowwise.ts";
import { input, setting } from "./view.ts";
import type { LayerKindSpec } from "./types.ts";

/**
 * Row-wise LayerNorm (src/nn/layerNorm.ts). Roles gamma, beta [d]; setting `eps`; input [b, n, d].
 * Rule (docs/math.md section 3): max over rows of max|gamma| / sqrt(var_row + eps), one value
 * for every variant.
 */
export const layerNormKind: LayerKindSpec<Float64Array> = {
  kind: "layerNorm",
  params: { required: ["gamma", "beta"] },
  forward: (x, ctx) => ({
    out: layerNorm(
      x,
      ctx.params.gamma,
      ctx.params.beta,
      setting(ctx.settings, "eps", "layerNorm") as number,
    ),
  }),
  prepare: (params) => Float64Array.from(params.gamma.data),
  rowJacobian(layer, row) {
    const x = input(layer);
    const d = x.shape[1];
    return layerNormRowJacobian(
      x.data.subarray(row * d, (row + 1) * d),
      layer.prepared,
      setting(layer.settings, "eps", layer.name) as number,
    );
  },
  rule(layer) {
    const x = input(layer);
    const [n, d] = x.shape;
    const eps = setting(layer.settings, "eps", layer.name) as number;
    return { value: layerNormBound(x.data, n, d, layer.prepared, eps).value };
  },
};
