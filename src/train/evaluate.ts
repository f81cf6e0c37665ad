import { tf } from "../backend.ts";
import { batches, type ImageSplit } from "../data/dataset.ts";
import type { Model } from "../nn/create.ts";
import { disposeTrace } from "../nn/trace.ts";
import { meanTraceSigma, type JasminNorm } from "./jasmin.ts";
import { crossEntropy } from "./loss.ts";

/** Test-set figures. */
export interface Evaluation {
  /** Fraction of correct predictions, in [0, 1]. */
  accuracy: number;
  /** Mean cross-entropy, nats per example. */
  crossEntropy: number;
  /** Number of examples evaluated. */
  count: number;
}

/**
 * Accuracy and mean cross-entropy of `model` on a split (inference mode: no dropout).
 * Leaves tf.memory().numTensors unchanged.
 *
 * @param options.batchSize examples per forward pass (default 250).
 * @param options.limit evaluate the first `limit` examples only (default all).
 * @returns {accuracy, crossEntropy, count}; NaN figures when the split is empty.
 * @throws RangeError from the model on images of the wrong size.
 */
export function evaluate(
  model: Model,
  split: ImageSplit,
  options: { batchSize?: number; limit?: number } = {},
): Evaluation {
  const n = Math.min(split.count, options.limit ?? split.count);
  const order = Int32Array.from({ length: n }, (_, i) => i);
  let correct = 0;
  let ceSum = 0;
  for (const batch of batches(split, order, options.batchSize ?? 250)) {
    const [c, ce] = tf.tidy(() => {
      const x = tf.tensor2d(batch.images, [batch.size, batch.images.length / batch.size]);
      const labels = tf.tensor1d(batch.labels, "int32");
      const { logits } = model.forward(x);
      const ceTotal = crossEntropy(logits, labels, "sum", "evaluate");
      const right = tf.sum(tf.cast(tf.equal(tf.argMax(logits, 1), labels), "float32"));
      return tf.stack([right, ceTotal]).dataSync();
    });
    correct += c;
    ceSum += ce;
  }
  return { accuracy: correct / n, crossEntropy: ceSum / n, count: n };
}

/**
 * Mean per-row sigma (sigma_top2 by default) of the attention rows of every layer and head
 * over the first `limit` examples of a split: how far attention is from the split rows JaSMin
 * penalises. Leaves tf.memory().numTensors unchanged.
 *
 * @param options.limit examples (default 256); options.norm per-row value (default "top2").
 * @returns the mean, a number in [0, 1/2].
 */
export function meanAttentionSigma(
  model: Model,
  split: ImageSplit,
  options: { limit?: number; norm?: JasminNorm; batchSize?: number } = {},
): number {
  const n = Math.min(split.count, options.limit ?? 256);
  const order = Int32Array.from({ length: n }, (_, i) => i);
  let sum = 0;
  for (const batch of batches(split, order, options.batchSize ?? 128)) {
    const value = tf.tidy(() => {
      const x = tf.tensor2d(batch.images, [batch.size, batch.images.length / batch.size]);
      const { trace } = model.forward(x, { trace: true });
      try {
        return meanTraceSigma(trace!, options.norm ?? "top2").dataSync()[0];
      } finally {
        disposeTrace(trace);
      }
    });
    sum += value * batch.size;
  }
  return sum / n;
}
