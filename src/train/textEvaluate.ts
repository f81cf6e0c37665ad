import type { TextSplit } from "../data/text/dataset.ts";
import type { Model } from "../nn/create.ts";
import { evaluateBatches, firstPositions, type Evaluation } from "./evaluate.ts";
import { TEXT_TRAINING } from "./kinds/text.ts";

/**
 * Accuracy and mean cross-entropy of a text model on a text split (inference mode, padding
 * masks honoured, each batch trimmed to its longest row): evaluate.ts evaluateBatches on the
 * text kind's batches. Leaves tf.memory().numTensors unchanged.
 *
 * @param options.batchSize examples per forward pass [250]; options.limit the first examples only.
 * @returns {accuracy in [0, 1], crossEntropy nats per example, count}; NaN when the split is empty.
 * @throws RangeError from the model on ids outside the vocabulary or rows longer than maxLength.
 * @example evaluateText(model, data.test).accuracy
 */
export function evaluateText(
  model: Model,
  split: TextSplit,
  options: { batchSize?: number; limit?: number } = {},
): Evaluation {
  const order = firstPositions(split.count, options.limit);
  return evaluateBatches(model, TEXT_TRAINING.batches(split, order, options.batchSize ?? 250), "evaluateText");
}
