import { tf } from "../backend.ts";

/**
 * LayerNorm over the last axis (Ba, Kiros & Hinton 2016):
 * y = gamma * (x - mean) / sqrt(var + eps) + beta, var the biased (1/d) variance.
 * Its Jacobian and local Lipschitz constant are in docs/math.md section 3. A constant row has
 * var = 0 and gives y = beta with finite gradients (the eps keeps rsqrt finite).
 *
 * @param x float32 [..., d].
 * @param gamma float32 [d].
 * @param beta float32 [d].
 * @param eps added to the variance (default 1e-5); must be > 0.
 * @returns float32 [..., d].
 * @throws RangeError when gamma or beta does not have length d, or eps <= 0.
 */
export function layerNorm(x: tf.Tensor, gamma: tf.Tensor, beta: tf.Tensor, eps = 1e-5): tf.Tensor {
  const d = x.shape[x.rank - 1];
  if (gamma.size !== d || beta.size !== d)
    throw new RangeError(
      `layerNorm: gamma/beta have ${gamma.size}/${beta.size} entries, expected ${d}`,
    );
  if (!(eps > 0)) throw new RangeError(`layerNorm: eps must be > 0, got ${eps}`);
  return tf.tidy(() => {
    const centered = tf.sub(x, tf.mean(x, -1, true));
    const variance = tf.mean(tf.square(centered), -1, true);
    const normalized = tf.mul(centered, tf.rsqrt(tf.add(variance, eps)));
    return tf.add(tf.mul(normalized, gamma), beta);
  });
}
