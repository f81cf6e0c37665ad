import { perVariant } from "./view.ts";
import type { LayerKindSpec } from "./types.ts";

/**
 * Layers in sequence (a transformer block: residual branches and LayerNorms). Rule
 * (docs/math.md section 3, chain rule): prod L_child per variant.
 */
export const sequenceKind: LayerKindSpec = {
  kind: "sequence",
  params: { required: [] },
  composite: true,
  forward: (x, ctx) => ({ out: ctx.inner(x) }),
  rule: (layer) => ({
    value: perVariant((v) => layer.children.reduce((p, c) => p * c[v], 1), layer.options.variants),
  }),
};
