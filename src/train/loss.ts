import { tf } from "../backend.ts";

/**
 * The one softmax cross-entropy of attnlip: training (trainer.ts), evaluation (evaluate.ts,
 * textEvaluate.ts) and the attacks (robustness/loss.ts) all call it.
 *
 * It is built from log-softmax with a `where` selection of the label's entry, never as
 * sum(oneHot * logSoftmax) or logits * oneHot: a logit of -inf (a class the model rules out)
 * times a 0 of the one-hot is NaN, which made the loss of logits [[-inf, 0, 0]] with label 1
 * NaN instead of ln 2. Not with tf.gather either: its gradient needs UnsortedSegmentSum,
 * which the wasm backend lacks, and GatherNd has no gradient in tfjs. The gradient of `where`
 * passes dy to the selected entry only (it multiplies dy, never the -inf), and log-softmax's
 * gradient dy - sum(dy) softmax is finite, so d CE / d logits = softmax - onehot stays exact.
 */

/** How {@link crossEntropy} reduces the per-example losses. */
export type CrossEntropyReduction = "none" | "sum" | "mean";

/**
 * Softmax cross-entropy of logits against integer labels, CE_i = -log softmax(z_i)[y_i]
 * = logsumexp(z_i) - z_i[y_i], in nats. A logit of -inf is an allowed value (that class has
 * probability 0): logits [[-inf, 0, 0]] with label 1 give ln 2 = 0.693147 and the gradient
 * [0, -0.5, 0.5]; label 0 gives +inf (the true class was ruled out), never NaN. A row with
 * a NaN or +inf logit, or only -inf logits, defines no distribution and gives NaN; the callers
 * check (trainStep skips such an update, predictClasses refuses such rows).
 *
 * @param logits float32 [batch, classes], classes >= 1.
 * @param labels int32 [batch], each in 0..classes-1 (read back once to check the range: a
 *   label outside it would select nothing and give a silent loss of 0).
 * @param reduction "none": float32 [batch]; "sum": a scalar summed over the batch (each
 *   example's gradient is its own, the attacks' choice); "mean": a scalar averaged over the
 *   batch (training) [default "mean"].
 * @param who the caller's name, first word of every error message ["crossEntropy"].
 * @returns the losses (new tensors; differentiable with respect to logits).
 * @throws TypeError when labels are not int32 or logits not float32; RangeError when logits
 *   are not [batch, classes], labels not [batch], the batch is empty for "mean", or a label
 *   is outside 0..classes-1.
 * @example
 *   crossEntropy(tf.tensor2d([[-Infinity, 0, 0]]), tf.tensor1d([1], "int32"), "sum") // ln 2
 */
export function crossEntropy(
  logits: tf.Tensor,
  labels: tf.Tensor,
  reduction: "sum" | "mean",
  who?: string,
): tf.Scalar;
export function crossEntropy(
  logits: tf.Tensor,
  labels: tf.Tensor,
  reduction: "none",
  who?: string,
): tf.Tensor1D;
export function crossEntropy(
  logits: tf.Tensor,
  labels: tf.Tensor,
  reduction?: CrossEntropyReduction,
  who?: string,
): tf.Tensor;
export function crossEntropy(
  logits: tf.Tensor,
  labels: tf.Tensor,
  reduction: CrossEntropyReduction = "mean",
  who = "crossEntropy",
): tf.Tensor {
  if (logits.dtype !== "float32")
    throw new TypeError(`${who}: logits must be float32 [batch, classes], got ${logits.dtype}`);
  if (logits.rank !== 2 || logits.shape[1] === 0)
    throw new RangeError(
      `${who}: logits must be [batch, classes] with classes >= 1, got [${logits.shape.join(", ")}]`,
    );
  const [b, c] = logits.shape as [number, number];
  if (labels.dtype !== "int32")
    throw new TypeError(`${who}: labels must be int32 [batch], got ${labels.dtype}`);
  if (labels.rank !== 1 || labels.shape[0] !== b)
    throw new RangeError(
      `${who}: labels must be [${b}] (one per row of the logits), got [${labels.shape.join(", ")}]`,
    );
  if (!["none", "sum", "mean"].includes(reduction))
    throw new RangeError(`${who}: reduction must be none, sum or mean, got ${String(reduction)}`);
  if (reduction === "mean" && b === 0)
    throw new RangeError(`${who}: the mean cross-entropy of an empty batch is undefined`);
  const values = labels.dataSync();
  for (let i = 0; i < b; i++)
    if (!(values[i] >= 0 && values[i] < c))
      throw new RangeError(
        `${who}: label ${i} is ${values[i]}, expected an integer in 0..${c - 1}`,
      );
  return tf.tidy(() => {
    // oneHot in int32 then compared (tfjs-backend-wasm's float32 OneHot is all zeros; see backend.ts).
    const selected = tf.equal(tf.oneHot(labels, c), 1);
    const logp = tf.logSoftmax(logits);
    const perExample = tf.neg(tf.sum(tf.where(selected, logp, tf.zerosLike(logp)), 1));
    if (reduction === "sum") return tf.sum(perExample);
    if (reduction === "mean") return tf.mean(perExample);
    return perExample;
  });
}
