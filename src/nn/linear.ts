import { tf } from "../backend.ts";

/**
 * Affine layers in the form measured fastest on wasm (docs/performance.md): one 2-D matmul on
 * [rows, in] x [in, out] with batch and token axes flattened into rows, and a custom gradient
 * made of plain 2-D matmuls (dX = dY W^T, dW = X^T dY with explicit transposes, which keep
 * XNNPACK's fast path) and a column sum for db.
 */

type Grads = (dy: tf.Tensor, saved: tf.Tensor[]) => tf.Tensor[];
type Custom = (...args: (tf.Tensor | tf.GradSaveFunc)[]) => { value: tf.Tensor; gradFunc: Grads };

const affineBias = tf.customGrad(((
  x: tf.Tensor,
  w: tf.Tensor,
  b: tf.Tensor,
  save: tf.GradSaveFunc,
) => {
  save([x, w]);
  return {
    value: tf.add(tf.matMul(x, w), b),
    // In a tidy: tfjs runs a custom gradient outside the per-input tidy of its backward pass,
    // so the transposes (a copy of W and of X) stayed alive until the whole backward pass ended.
    gradFunc: (dy: tf.Tensor, [xs, ws]: tf.Tensor[]) =>
      tf.tidy(() => [
        tf.matMul(dy, tf.transpose(ws)),
        tf.matMul(tf.transpose(xs), dy),
        tf.sum(dy, 0),
      ]),
  };
}) as unknown as Custom as Parameters<typeof tf.customGrad>[0]);

const affineNoBias = tf.customGrad(((x: tf.Tensor, w: tf.Tensor, save: tf.GradSaveFunc) => {
  save([x, w]);
  return {
    value: tf.matMul(x, w),
    gradFunc: (dy: tf.Tensor, [xs, ws]: tf.Tensor[]) =>
      tf.tidy(() => [tf.matMul(dy, tf.transpose(ws)), tf.matMul(tf.transpose(xs), dy)]),
  };
}) as unknown as Custom as Parameters<typeof tf.customGrad>[0]);

/**
 * y = x W + b over the last axis.
 *
 * @param x float32 [..., in] (any leading axes; flattened to [rows, in] for the matmul).
 * @param w float32 [in, out].
 * @param b optional float32 [out].
 * @returns float32 [..., out].
 * @throws RangeError when x's last axis is not w's first, or b's length is not w's second.
 */
export function linear(x: tf.Tensor, w: tf.Tensor, b?: tf.Tensor): tf.Tensor {
  const inDim = x.shape[x.rank - 1];
  if (w.rank !== 2 || w.shape[0] !== inDim)
    throw new RangeError(
      `linear: x has last axis ${inDim}, weight has shape [${w.shape.join(", ")}]`,
    );
  const outDim = w.shape[1] as number;
  if (b !== undefined && (b.rank !== 1 || b.shape[0] !== outDim))
    throw new RangeError(`linear: bias has shape [${b.shape.join(", ")}], expected [${outDim}]`);
  return tf.tidy(() => {
    const flat = x.rank === 2 ? x : tf.reshape(x, [-1, inDim]);
    const y = b === undefined ? affineNoBias(flat, w) : affineBias(flat, w, b);
    return x.rank === 2 ? y : tf.reshape(y, [...x.shape.slice(0, -1), outDim]);
  });
}
