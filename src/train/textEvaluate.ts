import { tf } from "../backend.ts";
import { textBatches, textBatchTensors, type TextSplit } from "../data/text/dataset.ts";
import type { Model } from "../nn/create.ts";
import type { Evaluation } from "./evaluate.ts";
import { crossEntropy } from "./loss.ts";

/**
 * Accuracy and mean cross-entropy of a text model on a text split (inference mode, padding
 * masks honoured, each batch trimmed to its longest row). Leaves tf.memory().numTensors
 * unchanged.
 *
 * @param options.batchSize examples per forward pass [250]; options.limit the first examples only.
 * @returns {accuracy in [0, 1], crossEntropy nats per example, count}; NaN when the split is empty.
 * @throws RangeError from the model on ids outside the vocabulary or rows longer than maxLength.
 */
export function evaluateText(
  model: Model,
  split: TextSplit,
  options: { batchSize?: number; limit?: number } = {},
): Evaluation {
  const n = Math.min(split.count, options.limit ?? split.count);
  const order = Int32Array.from({ length: n }, (_, i) => i);
  let correct = 0;
  let ceSum = 0;
  for (const batch of textBatches(split, order, options.batchSize ?? 250)) {
    const [c, ce] = tf.tidy(() => {
      const { ids, mask } = textBatchTensors(batch);
      const labels = tf.tensor1d(batch.labels, "int32");
      const { logits } = model.forward(ids, { mask });
      const ceTotal = crossEntropy(logits, labels, "sum", "evaluateText");
      const right = tf.sum(tf.cast(tf.equal(tf.argMax(logits, 1), labels), "float32"));
      return tf.stack([right, ceTotal]).dataSync();
    });
    correct += c;
    ceSum += ce;
  }
  return { accuracy: correct / n, crossEntropy: ceSum / n, count: n };
}
