export {
  HEAD_VARIANTS,
  ALL_VARIANTS,
  defaultVariants,
  checkVariants,
  KIM_DOT_REFUSED,
  L2_LOCAL_DOT_REFUSED,
  L2_LOCAL_VARIANTS,
  L2_VARIANTS,
  EXTRA_COLOURS,
  registerBoundVariant,
  unregisterBoundVariant,
  boundVariant,
  boundVariants,
  findBoundVariant,
  variantNames,
  variantColours,
  type BoundVariantSpec,
  type DotBoundVariant,
  type L2BoundVariant,
  type L2GlobalBoundVariant,
  type RegisteredVariant,
  type VariantFamily,
  type DotNeed,
  type DotHeadQuantities,
  type L2Need,
  type L2HeadQuantities,
  type L2HeadNorms,
} from "../variants/index.ts";
export {
  attentionHeadBounds,
  headWeightNorms,
  headRowStats,
  inputNorms,
  type HeadVariant,
  type VariantValues,
  type HeadWeights,
  type HeadNorms,
  type HeadActivations,
  type HeadBounds,
  type HeadParts,
  type HeadRowStats,
  type InputNorms,
} from "./attentionHead.ts";
export { attentionLayerBound } from "./attentionLayer.ts";
export { kimHeadBound, kimPhiInverse } from "./kim.ts";
export {
  l2HeadBounds,
  l2HeadWeights,
  type L2HeadBounds,
  type L2HeadParts,
  type L2HeadWeights,
} from "./l2Head.ts";
export { lambertW0 } from "./lambertW.ts";
export { layerNormBound, type LayerNormBound } from "./layerNorm.ts";
export { mlpBound, type MlpBound } from "./mlp.ts";
export { residualBound, blockBound, type BlockParts } from "./block.ts";
export { patchEmbeddingBound, tokenEmbeddingBound } from "./embedding.ts";
export { finalNormBound, headBound } from "./output.ts";
export {
  modelWeightNorms,
  headWeights,
  headWeightsFrom,
  type Weights,
  type NormShape,
  type ModelWeightNorms,
  type BlockWeightNorms,
} from "./weightNorms.ts";
export {
  spectralNorm,
  symMaxEigenvalue,
  symEigen,
  sqrtFactor,
  gramCols,
  gramRows,
  matMul,
  congruence,
} from "../linalg.ts";
export * from "../layers/index.ts";
