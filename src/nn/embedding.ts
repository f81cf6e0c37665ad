import { tf } from "../backend.ts";

type Custom = (...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
  value: tf.Tensor;
  gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => tf.Tensor[];
};

const lookup = tf.customGrad(((table: tf.Tensor, ids: tf.Tensor, save: tf.GradSaveFunc) => {
  save([ids]);
  const shape = table.shape;
  return {
    value: tf.gather(table, ids),
    // dTable[r] = sum of dy over the positions whose id is r: scatterND sums duplicate indices.
    gradFunc: (dy: tf.Tensor, [saved]: tf.Tensor[]) => [
      tf.scatterND(tf.reshape(saved, [-1, 1]), dy, shape),
      tf.zeros(saved.shape, "float32"),
    ],
  };
}) as unknown as Custom as Parameters<typeof tf.customGrad>[0]);

/**
 * Embedding lookup out[..., :] = table[ids[...], :] with a gradient that works on wasm.
 * tf.gather's own gradient needs UnsortedSegmentSum, which the wasm backend lacks; here the
 * table gradient is oneHot(ids)^T dy computed as a scatter-add (tf.scatterND accumulates
 * duplicate indices), with no [rows, vocab] one-hot matrix. The ids get no gradient.
 * (The gradient of this gradient with respect to dy is not defined: ScatterNd has no gradient
 * rule; nothing in attnlip differentiates the table gradient.)
 *
 * @param table float32 [vocab, d].
 * @param ids int32 of any shape [...], entries in [0, vocab).
 * @returns float32 [..., d].
 * @throws TypeError when ids is not int32; RangeError when table is not rank 2 or an id is out
 *   of range (checked on the JS side).
 */
export function embeddingLookup(table: tf.Tensor, ids: tf.Tensor): tf.Tensor {
  if (ids.dtype !== "int32") throw new TypeError(`embedding: ids must be int32, got ${ids.dtype}`);
  if (table.rank !== 2)
    throw new RangeError(`embedding: table must be [vocab, d], got [${table.shape.join(", ")}]`);
  const vocab = table.shape[0];
  const values = ids.dataSync();
  for (let i = 0; i < values.length; i++)
    if (!(values[i] >= 0 && values[i] < vocab))
      throw new RangeError(
        `embedding: id ${values[i]} at flat position ${i} is outside [0, ${vocab})`,
      );
  return tf.tidy(() => {
    const flat = tf.reshape(ids, [-1]);
    return tf.reshape(lookup(table, flat), [...ids.shape, table.shape[1] as number]);
  });
}
