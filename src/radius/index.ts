/** The radius and length sweeps of one attention sub-layer (docs/math.md section 6). */
export {
  radiusSweep,
  type RadiusOptions,
  type RadiusResult,
  type RadiusPoint,
  type InputSet,
} from "./sweep.ts";
export {
  findAttentionSublayer,
  SublayerMap,
  type AttentionSublayer,
  type TrueValue,
  type TruthOptions,
} from "./sublayer.ts";
export { constructedInputs, type ConstructedInput } from "./construct.ts";
export { globalBounds, type GlobalBound } from "./globalBounds.ts";
export {
  RADIUS_MEASURE,
  defaultRadii,
  maxTokenNorm,
  scaleToRadius,
  evenlySpaced,
  logLogSlope,
} from "./grid.ts";
