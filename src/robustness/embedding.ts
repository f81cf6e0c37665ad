import type { tf } from "../backend.ts";
import type { TextClassifier } from "../nn/textClassifier.ts";
import { evaluateIn, type EvaluateRobustnessOptions, type RobustnessEvaluation } from "./evaluate.ts";
import { fgsmIn } from "./fgsm.ts";
import {
  checkText,
  embeddingBatch,
  embeddingLogits,
  embeddingSpace,
  NO_CLIP,
  type TextInputs,
} from "./inputSpace.ts";
import { lipschitzProxyIn, type LipschitzProxy } from "./lipschitzProxy.ts";
import { labelTensor, type Labels, type ZeroGradientFn } from "./loss.ts";
import { resolveAttackOptions, type AttackNorm } from "./options.ts";
import { pgdIn, type PgdOptions } from "./pgd.ts";

/**
 * Attacks on text classifiers in EMBEDDING space: the registered attacks, evaluation and the
 * Lipschitz proxy on {@link embeddingSpace} (inputSpace.ts says what that space is: token
 * embeddings E = tok[ids] of the real tokens, padding rows never moved, NO clipping). eps is in
 * embedding units; compare it with the typical token-embedding norm (attack.json records eps
 * as given). The l_2 norm is per example over all n * d entries (padding contributes 0), l_inf
 * is per entry.
 */

export { embeddingLogits, NO_CLIP, type TextInputs };

/**
 * The token embeddings of a batch, E = tok[ids], float32 [b, n, d] (padding rows hold the
 * [PAD] embedding; they are masked in attention). The caller disposes it.
 *
 * @example tokenEmbeddingsOf(model, ids).shape // [b, n, d]
 */
export function tokenEmbeddingsOf(model: TextClassifier, ids: tf.Tensor): tf.Tensor {
  return model.tokenEmbeddings(ids);
}

/** Runs one registered attack's `run` on a whole text batch (checks, labels, disposal). */
function onTextBatch(
  model: TextClassifier,
  inputs: TextInputs,
  labels: Labels,
  who: string,
  settings: ReturnType<typeof resolveAttackOptions>,
  run: typeof fgsmIn,
  callbacks: { onWarning?: (m: string) => void; onZeroGradient?: ZeroGradientFn },
): tf.Tensor {
  const y = labelTensor(labels, inputs.ids.shape[0] as number, model.config.classes, who);
  const batch = embeddingBatch(model, inputs);
  try {
    return run({ batch, kind: "embedding", labels: y, settings, who, ...callbacks });
  } finally {
    batch.dispose();
    y.dispose();
  }
}

/**
 * FGSM in embedding space (one step of size eps on the masked cross-entropy gradient; l_inf:
 * sign, l_2: normalised per example). No clipping. An example whose gradient is exactly zero
 * is left unchanged and flagged (one warning, options.onZeroGradient).
 *
 * @param inputs ids int32 [b, n] and mask [b, n]; @param labels true classes [b].
 * @param options.eps radius, finite and >= 0, in embedding units (no upper bound: the
 *   embedding space has no valid range).
 * @returns adversarial token embeddings float32 [b, n, d] (caller disposes); padding rows
 *   equal tok[PAD].
 * @throws RangeError on a non-text model, malformed ids / mask / labels, or a bad eps / norm.
 * @example fgsmEmbedding(model, { ids, mask }, [0, 1], { eps: 0.5, norm: "l2" })
 */
export function fgsmEmbedding(
  model: TextClassifier,
  inputs: TextInputs,
  labels: Labels,
  options: {
    eps: number;
    norm?: AttackNorm;
    onWarning?: (m: string) => void;
    onZeroGradient?: ZeroGradientFn;
  },
): tf.Tensor {
  const who = "fgsmEmbedding";
  checkText(model, inputs, who);
  const o = resolveAttackOptions(
    { eps: options.eps, norm: options.norm, steps: 1, clip: NO_CLIP },
    who,
  );
  return onTextBatch(model, inputs, labels, who, o, fgsmIn, options);
}

/**
 * PGD in embedding space (Madry et al. 2018; l_inf or l_2): random start in the ball (seeded,
 * zeroed on padding rows), `steps` ascent steps on the masked cross-entropy gradient, each
 * projected onto the eps-ball around E0 = tok[ids]; no clipping. Returns the last iterate.
 *
 * @param inputs ids int32 [b, n] and mask [b, n]; @param labels true classes [b].
 * @param options as {@link PgdOptions} (clip and start are ignored).
 * @returns adversarial token embeddings float32 [b, n, d] (caller disposes).
 * @throws RangeError on a non-text model, malformed inputs or labels, or bad options.
 * @example pgdEmbedding(model, { ids, mask }, [0, 1], { eps: 0.5, norm: "l2", steps: 5 })
 */
export function pgdEmbedding(
  model: TextClassifier,
  inputs: TextInputs,
  labels: Labels,
  options: PgdOptions,
): tf.Tensor {
  const who = "pgdEmbedding";
  checkText(model, inputs, who);
  const o = resolveAttackOptions({ ...options, clip: NO_CLIP }, who);
  return onTextBatch(model, inputs, labels, who, o, pgdIn, options);
}

/**
 * Clean and robust accuracy of a text classifier under the registered attacks (FGSM and PGD by
 * default) in embedding space: {@link evaluateIn} on {@link embeddingSpace}, the same figures
 * and rules as evaluateRobustness for images. Each batch is trimmed to its longest real row
 * (padding columns do not change the logits). options.clip is ignored (no clipping).
 *
 * @param inputs ids int32 [N, n] and mask [N, n] (not disposed); @param labels true classes [N].
 * @returns as evaluateRobustness; leaves tf.memory().numTensors unchanged.
 * @throws RangeError on a non-text model, malformed inputs, labels or options.
 * @example evaluateTextRobustness(model, { ids, mask }, labels, { eps: [0, 0.5], norm: "l2" }).cleanAccuracy
 */
export function evaluateTextRobustness(
  model: TextClassifier,
  inputs: TextInputs,
  labels: Labels,
  options: EvaluateRobustnessOptions,
): RobustnessEvaluation {
  const who = "evaluateTextRobustness";
  return evaluateIn(embeddingSpace(model, inputs, who), labels, options, who);
}

/**
 * The Lipschitz proxy radius of each text example in embedding space: r = margin / (sqrt(2) L)
 * with L = networkLipschitz(model, ids, {mask}) (the exact spectral norm of the logits'
 * Jacobian w.r.t. the sequence entering block 0, padding columns zero), as lipschitzProxy
 * for images ({@link lipschitzProxyIn} on {@link embeddingSpace}). A proxy, not a certificate.
 * Misclassified examples get radius 0.
 *
 * @param inputs ids int32 [N, n] and mask [N, n]; @param labels true classes [N].
 * @returns radii (l_2, embedding units), margins, L and the misclassified count; leaves
 *   numTensors unchanged.
 * @throws RangeError on a non-text model or malformed inputs / labels.
 * @example textLipschitzProxy(model, { ids, mask }, labels, { batchSize: 32 }).radii
 */
export function textLipschitzProxy(
  model: TextClassifier,
  inputs: TextInputs,
  labels: Labels,
  options: { batchSize?: number; examplesPerPass?: number } = {},
): LipschitzProxy {
  const who = "textLipschitzProxy";
  return lipschitzProxyIn(embeddingSpace(model, inputs, who), labels, options, who);
}
