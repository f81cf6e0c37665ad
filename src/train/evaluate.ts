import { tf } from "../backend.ts";
import type { ImageSplit } from "../data/dataset.ts";
import type { Model } from "../nn/create.ts";
import { disposeTrace } from "../nn/trace.ts";
import { meanTraceSigma, type JasminNorm } from "./jasmin.ts";
import { crossEntropy } from "./loss.ts";
import { IMAGE_TRAINING } from "./kinds/image.ts";
import type { ModelBatch } from "./kinds/registry.ts";

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
 * Accuracy and mean cross-entropy of `model` over batches of any kind (inference mode: no
 * dropout). Leaves tf.memory().numTensors unchanged.
 *
 * @param batches the examples (a training kind's batches: kinds/registry.ts ModelBatch).
 * @param who the caller, for messages.
 * @returns {accuracy in [0, 1], crossEntropy nats per example, count}; NaN figures when empty.
 * @throws RangeError from the model on malformed inputs.
 * @example evaluateBatches(model, TEXT_TRAINING.batches(data.test, null, 250), "me").accuracy
 */
export function evaluateBatches(
  model: Model,
  batches: Iterable<ModelBatch>,
  who = "evaluate",
): Evaluation {
  const sums = { n: 0, correct: 0, ce: 0 };
  for (const batch of batches) addBatch(sums, model, batch, who);
  return { accuracy: sums.correct / sums.n, crossEntropy: sums.ce / sums.n, count: sums.n };
}

/**
 * {@link evaluateBatches} with a macrotask turn before each batch, for the evaluation at the end
 * of a training epoch: a signal handler (Ctrl-C) runs between batches instead of after the whole
 * test split (5-9 s on the demo's vit-tiny). The same figures, bit for bit.
 *
 * @example const test = await evaluateBatchesYielding(model, kind.batches(split, null, 250), "evaluate");
 */
export async function evaluateBatchesYielding(
  model: Model,
  batches: Iterable<ModelBatch>,
  who = "evaluate",
): Promise<Evaluation> {
  const sums = { n: 0, correct: 0, ce: 0 };
  for (const batch of batches) {
    await new Promise<void>((resolve) => setImmediate(resolve));
    addBatch(sums, model, batch, who);
  }
  return { accuracy: sums.correct / sums.n, crossEntropy: sums.ce / sums.n, count: sums.n };
}

/** Adds one batch's example count, correct predictions and summed cross-entropy to `sums`. */
function addBatch(
  sums: { n: number; correct: number; ce: number },
  model: Model,
  batch: ModelBatch,
  who: string,
): void {
  const [c, ce] = tf.tidy(() => {
    const { x, mask } = batch.inputs();
    const labels = tf.tensor1d(batch.labels, "int32");
    const { logits } = model.forward(x, mask === undefined ? {} : { mask });
    const ceTotal = crossEntropy(logits, labels, "sum", who);
    const right = tf.sum(tf.cast(tf.equal(tf.argMax(logits, 1), labels), "float32"));
    return tf.stack([right, ceTotal]).dataSync();
  });
  sums.n += batch.size;
  sums.correct += c;
  sums.ce += ce;
}

/** The first `limit` positions of a split (all when undefined). */
export function firstPositions(count: number, limit: number | undefined): Int32Array {
  return Int32Array.from({ length: Math.min(count, limit ?? count) }, (_, i) => i);
}

/**
 * Accuracy and mean cross-entropy of `model` on an image split ({@link evaluateBatches}).
 *
 * @param options.batchSize examples per forward pass (default 250).
 * @param options.limit evaluate the first `limit` examples only (default all).
 * @returns {accuracy, crossEntropy, count}; NaN figures when the split is empty.
 * @throws RangeError from the model on images of the wrong size.
 * @example evaluate(model, data.test).accuracy
 */
export function evaluate(
  model: Model,
  split: ImageSplit,
  options: { batchSize?: number; limit?: number } = {},
): Evaluation {
  const order = firstPositions(split.count, options.limit);
  return evaluateBatches(
    model,
    IMAGE_TRAINING.batches(split, order, options.batchSize ?? 250),
    "evaluate",
  );
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
  for (const batch of IMAGE_TRAINING.batches(split, order, options.batchSize ?? 128)) {
    const value = tf.tidy(() => {
      const { x } = batch.inputs();
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
