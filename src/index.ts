/**
 * attnlip's library entry point: the softmax-Jacobian norms, the transformer layers, the
 * local Lipschitz bounds and true values, JaSMin, and the attacks. The CLI (src/cli/) is built
 * on these.
 *
 * @example
 *   import { sigma } from "attnlip";
 *   sigma([0.5, 0.3, 0.2]); // 0.3881024967590665
 */
export * from "./softmax/index.ts";
export * from "./nn/index.ts";
export * from "./lipschitz/rules/index.ts";
export { networkBounds } from "./lipschitz/networkBounds.ts";
export * from "./lipschitz/truth/index.ts";
export { jasminPenalty } from "./train/jasmin.ts";
export * from "./robustness/index.ts";
