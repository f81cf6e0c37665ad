/**
 * attnlip's library entry point (`import ... from "attnlip"`): the softmax-Jacobian norms, the
 * transformer layers, the local Lipschitz bounds and true values, the analysis of a model at
 * inputs, JaSMin, the attacks and the safetensors format (bytes in, bytes out). Nothing here
 * imports a Node module (test/architecture/imports.test.ts checks it), so it runs wherever
 * tfjs runs; files, checkpoints, training runs and the report are in `attnlip/node`
 * (src/node.ts). The CLI (src/cli/) is built on both.
 *
 * @example
 *   import { sigma } from "attnlip";
 *   sigma([0.5, 0.3, 0.2]); // 0.3881024967590665
 */
export * from "./softmax/index.ts";
export * from "./nn/index.ts";
export * from "./lipschitz/rules/index.ts";
export {
  networkBounds,
  type NetworkBounds,
  type NetworkBoundsOptions,
  type BoundSource,
} from "./lipschitz/networkBounds.ts";
export * from "./lipschitz/truth/index.ts";
export { jasminPenalty, type JasminOptions } from "./train/jasmin.ts";
export * from "./robustness/index.ts";
export {
  analyze,
  type Analysis,
  type AnalyzeOptions,
  type AttentionMaps,
  type AttentionRowSample,
  type BlockAnalysis,
  type BoundsAgainstTruth,
  type BoundsSummary,
  type ConvergenceSummary,
  type FloorSummary,
} from "./analysis/analyze.ts";
export * from "./radius/index.ts";
export {
  decodeSafetensors,
  encodeSafetensors,
  SafetensorsError,
  type DecodeSafetensorsOptions,
  type DecodedSafetensors,
  type SafetensorsDtype,
  type TensorToWrite,
} from "./io/safetensors.ts";
export { tf, useBackend, BACKENDS, type BackendName, type AnyBackendName } from "./backend.ts";
