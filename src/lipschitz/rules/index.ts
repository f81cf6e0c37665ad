export {
  HEAD_VARIANTS,
  ALL_VARIANTS,
  defaultVariants,
  checkVariants,
  KIM_DOT_REFUSED,
  L2_LOCAL_DOT_REFUSED,
  L2_LOCAL_VARIANTS,
  L2_VARIANTS,
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
