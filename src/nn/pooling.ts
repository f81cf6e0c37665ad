import { tf } from "../backend.ts";

/** How a model pools its final token states into one vector per sequence. */
export type Pooling = "cls" | "mean" | "last";

/** The poolings, for validation and messages. */
export const POOLINGS: readonly Pooling[] = ["cls", "mean", "last"];

/**
 * Pooling of the final token states [b, n, d] to [b, d]:
 * - "cls": the first token ({@link firstToken});
 * - "mean": the mean over the real tokens of `mask` (all tokens when null; an example with no
 *   real token pools to 0);
 * - "last": the last real token of `mask` (the last token when null; an example with no real
 *   token pools to 0), as Hugging Face's GPT2ForSequenceClassification does.
 *
 * @param final float32 [b, n, d]. @param mask float32 [b, n] with 1 = real token, or null.
 * @returns float32 [b, d].
 * @throws RangeError on an unknown pooling.
 * @example poolTokens(tf.ones([2, 3, 4]), "mean", null).shape // [2, 4]
 */
export function poolTokens(final: tf.Tensor, pooling: Pooling, mask: tf.Tensor | null): tf.Tensor {
  if (pooling === "cls") return firstToken(final);
  if (pooling === "last") return lastToken(final, mask);
  if (pooling !== "mean") throw new RangeError(`pooling: unknown pooling "${String(pooling)}", expected one of ${POOLINGS.join(", ")}`);
  return tf.tidy(() => {
    if (mask === null) return tf.mean(final, 1);
    const [b, n] = mask.shape;
    const summed = tf.sum(tf.mul(final, tf.reshape(mask, [b, n, 1])), 1);
    const count = tf.maximum(tf.sum(mask, 1, true), 1);
    return tf.div(summed, count);
  });
}

/**
 * The first token's state: final[:, 0, :].
 *
 * @param final float32 [b, n, d].
 * @returns float32 [b, d].
 * @example firstToken(tf.ones([2, 3, 4])).shape // [2, 4]
 */
export function firstToken(final: tf.Tensor): tf.Tensor {
  const [b, , d] = final.shape;
  return tf.tidy(() => tf.reshape(tf.slice(final, [0, 0, 0], [b, 1, d]), [b, d]));
}

/**
 * The index of each example's last real token (-1 when it has none), read from a padding mask.
 *
 * @param mask [b, n] values, nonzero = real token, row-major.
 * @example lastRealIndex([1, 1, 0, 0, 0, 0], 2, 3) // Int32Array [1, -1]
 */
export function lastRealIndex(mask: ArrayLike<number>, b: number, n: number): Int32Array {
  const out = new Int32Array(b).fill(-1);
  for (let e = 0; e < b; e++) for (let i = n - 1; i >= 0; i--) if (mask[e * n + i] !== 0) {
    out[e] = i;
    break;
  }
  return out;
}

/**
 * The last real token's state: final[e, last(e), :] (see {@link poolTokens}, "last"). The mask is
 * data, not differentiated: the selection is built on the JS side.
 *
 * @param final float32 [b, n, d]. @param mask float32 [b, n] (1 = real token) or null (all real).
 * @returns float32 [b, d].
 * @example lastToken(tf.ones([2, 3, 4]), null).shape // [2, 4]
 */
export function lastToken(final: tf.Tensor, mask: tf.Tensor | null): tf.Tensor {
  const [b, n, d] = final.shape as [number, number, number];
  if (mask === null) return tf.tidy(() => tf.reshape(tf.slice(final, [0, n - 1, 0], [b, 1, d]), [b, d]));
  const pick = new Float32Array(b * n);
  lastRealIndex(mask.dataSync(), b, n).forEach((i, e) => {
    if (i >= 0) pick[e * n + i] = 1;
  });
  return tf.tidy(() => tf.sum(tf.mul(final, tf.tensor3d(pick, [b, n, 1])), 1));
}
