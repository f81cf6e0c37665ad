import { tf } from "../backend.ts";
import type { TransformerClassifier } from "../nn/model.ts";
import { disposeTrace } from "../nn/index.ts";
import { weightSpectralNormCached } from "../lipschitz/weightCache.ts";
import { estimateAnalysis, javascriptSpeed, type AnalysisEstimate, type EstimatePlan } from "./estimate.ts";

/** What of a run {@link estimateForRun} needs besides the model and the inputs. */
export interface EstimateRequest {
  variants: readonly string[];
  mlp: "local" | "relaxed";
  blockTruth: boolean;
  headTruth: boolean;
  iterations: number;
  workers: number;
}

/**
 * Measures this machine's speed on this model (two traced forward passes of the first input, the
 * faster counted, and the JavaScript kernel: about the time of two forward passes) and estimates the analysis of all
 * the inputs with {@link estimateAnalysis}.
 *
 * @param model the model to be analysed.
 * @param x its inputs [count, ...] (the first is run once); mask [count, n] or null.
 * @returns the estimate (seconds per stage for all inputs, per input, in all).
 * @throws as the model's forward pass on malformed inputs.
 * @example const e = estimateForRun(model, x, null, { variants: ["t3-exact"], mlp: "relaxed", blockTruth: true, headTruth: false, iterations: 1000, workers: 1 });
 */
export function estimateForRun(
  model: TransformerClassifier,
  x: tf.Tensor,
  mask: tf.Tensor | null,
  request: EstimateRequest,
): AnalysisEstimate {
  const c = model.config;
  const first = tf.tidy(() => tf.slice(x, 0, 1));
  const firstMask = mask === null ? null : tf.tidy(() => tf.slice(mask, 0, 1));
  // Two passes, the faster counted: the first also pays the backend's warm-up (kernels, memory).
  let forwardSeconds = Infinity;
  try {
    for (let pass = 0; pass < 2; pass++) {
      const t0 = performance.now();
      const { logits, trace } = model.forward(first, { trace: true, mask: firstMask });
      logits.dataSync();
      logits.dispose();
      if (trace !== null) disposeTrace(trace);
      forwardSeconds = Math.min(forwardSeconds, (performance.now() - t0) / 1000);
    }
  } finally {
    first.dispose();
    firstMask?.dispose();
  }
  const plan: EstimatePlan = {
    blocks: c.blocks,
    heads: c.heads,
    dModel: c.dModel,
    mlpHidden: c.mlpHidden,
    tokens: c.kind === "vit" ? (c.imageSize / c.patchSize) ** 2 + 1 : (x.shape[1] as number),
    classes: c.classes,
    preNorm: c.norm === "pre",
    inputs: x.shape[0] as number,
    ...request,
    weightNormsCached: lastWeightNormCached(model),
  };
  return estimateAnalysis(plan, { forwardSeconds, kernelSeconds: javascriptSpeed() });
}

/** Whether the last block's ||W_2|| (the last weight norm computed) is in the weight cache. */
function lastWeightNormCached(model: TransformerClassifier): boolean {
  const c = model.config;
  const prefix = `blocks.${c.blocks - 1}.mlp.w2`;
  const w2 = model.variables().find((v) => v.name === prefix || v.name.startsWith(`${prefix}#`));
  if (w2 === undefined || w2.rank !== 2) return false;
  return weightSpectralNormCached(w2.dataSync() as Float32Array, w2.shape[0] as number, w2.shape[1] as number);
}
