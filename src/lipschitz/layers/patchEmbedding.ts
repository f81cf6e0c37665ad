import { linear } from "../../nn/linear.ts";
import { patchEmbeddingBound } from "../rules/embedding.ts";
import { cachedWeightQuantity, isNorm } from "../weightCache.ts";
import type { LayerKindSpec } from "./types.ts";

/**
 * ViT patch embedding patches W + b (src/nn/vit.ts; the model adds the CLS row and positions,
 * constants). Roles w [p*p*c, d], b [d]; input (not kept by the classifiers) [b, N, p*p*c].
 * Rule (docs/math.md section 3): exactly ||W||_2, one value for every variant.
 */
export const patchEmbeddingKind: LayerKindSpec<number> = {
  kind: "patchEmbedding",
  params: { required: ["w"], optional: ["b"] },
  forward: (x, ctx) => ({ out: linear(x, ctx.params.w, ctx.params.b) }),
  prepare: (params) =>
    cachedWeightQuantity(
      `patchEmbeddingBound ${params.w.shape.join("x")}`,
      [params.w.data],
      () => patchEmbeddingBound(params.w.data, params.w.shape[0], params.w.shape[1]),
      isNorm,
    ),
  rule: (layer) => ({ value: layer.prepared }),
};
