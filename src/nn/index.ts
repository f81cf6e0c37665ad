
export {
  parseModelConfig,
  modelPreset,
  ConfigError,
  PRESET_NAMES,
  VitConfigSchema,
  TextConfigSchema,
  ModelConfigSchema,
  type ModelConfig,
  type ModelConfigInput,
  type VitConfig,
  type TextConfig,
  type PresetName,
} from "./config.ts";
export { ParamStore, type NamedArray, type Init } from "./params.ts";
export { mulberry32, fillNormal, fillUniform } from "./prng.ts";
export { linear } from "./linear.ts";
export { layerNorm } from "./layerNorm.ts";
export {
  mlp,
  geluTensor,
  gelu,
  geluDerivative,
  GELU_DERIVATIVE_MAX,
  geluErfTensor,
  geluErf,
  geluErfDerivative,
  GELU_ERF_DERIVATIVE_MAX,
  activationTensor,
  type MlpParams,
  type MlpResult,
} from "./mlp.ts";
export { ACTIVATIONS, activationDerivative, type Activation } from "./gelu.ts";
export { allowedKeys, maskOffset } from "./mask.ts";
export { multiHeadAttention, type AttentionParams, type AttentionResult } from "./attention.ts";
export { l2MultiHeadAttention, type L2AttentionParams } from "./l2Attention.ts";
export {
  transformerBlock,
  blockLayer,
  blockAttention,
  addBlockParams,
  blockParams,
  type BlockConfig,
  type BlockParams,
  type BlockOptions,
  type BlockResult,
} from "./block.ts";
export { embeddingLookup } from "./embedding.ts";
export {
  disposeTrace,
  traceTensors,
  eachLayer,
  findLayer,
  TRACE_NAMES,
  type TracedLayer,
  type LayerTrace,
  type ForwardTrace,
  type BlockTrace,
  type AttentionTrace,
} from "./trace.ts";
export {
  TransformerClassifier,
  firstToken,
  poolTokens,
  type ForwardOptions,
  type ForwardResult,
} from "./model.ts";
export { VisionTransformer } from "./vit.ts";
export { TextClassifier } from "./textClassifier.ts";
export { createModel, type Model } from "./create.ts";
