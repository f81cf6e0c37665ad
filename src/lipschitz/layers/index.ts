export { registerLayerKind, unregisterLayerKind, layerKind, layerKinds } from "./registry.ts";
export type {
  LayerKindSpec,
  LayerView,
  LayerBound,
  LayerSettings,
  ExampleArray,
  RuleOptions,
  ForwardContext,
  ForwardOutput,
} from "./types.ts";
export { input, extra, setting, perVariant } from "./view.ts";
export { forwardLayers, type LayerDecl, type LayersForward } from "./forward.ts";
export {
  attentionKind,
  attentionStats,
  type AttentionStats,
  type AttentionDetail,
  type AttentionPrepared,
  type HeadReport,
} from "./attention.ts";
export { l2AttentionKind, L2_NO_BOUND } from "./l2Attention.ts";
export { layerNormKind } from "./layerNorm.ts";
export { mlpKind, type MlpPrepared } from "./mlp.ts";
export { residualKind } from "./residual.ts";
export { sequenceKind } from "./sequence.ts";
export { patchEmbeddingKind } from "./patchEmbedding.ts";
export { tokenEmbeddingKind } from "./tokenEmbedding.ts";
export { finalNormKind } from "./finalNorm.ts";
export { linearKind } from "./linear.ts";
export { composeBounds, type LayerReport, type ComposedExample } from "../compose.ts";
