/** True local Lipschitz values (docs/math.md section 5): Jacobian products, power iteration, exact Jacobians. */
export { vjp, jvp, outputShape, type TensorFn } from "./jacobianProducts.ts";
export {
  powerIterationLipschitz,
  normalize,
  blockLipschitz,
  attentionLayerLipschitz,
  headLipschitz,
  headOutput,
  TRUTH_METHOD,
  type PowerIterationOptions,
  type PowerIterationResult,
} from "./powerIteration.ts";
export {
  denseJacobian,
  denseLipschitz,
  type DenseJacobian,
  type DenseJacobianOptions,
} from "./denseJacobian.ts";
export {
  inputJacobian,
  networkLipschitz,
  type LogitsFn,
  type NetworkLipschitzOptions,
} from "./inputJacobian.ts";
export { symEigen, spectralNorm, euclideanNorm } from "../linalg.ts";
