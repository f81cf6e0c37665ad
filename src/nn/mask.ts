import { tf } from "../backend.ts";

/**
 * Attention masks. A mask is float32 with 1 where a query may attend to a key and 0 where it
 * may not, broadcastable to the score shape [batch, heads, n, n].
 */

/**
 * Builds the allowed-keys mask from a padding mask and/or causality.
 *
 * @param padding optional [batch, n] (any numeric or bool dtype), 1/true = real token. Padded
 *   keys are masked for every query; padded queries still attend to the real keys.
 * @param causal when true, query i may attend to keys j <= i only.
 * @param n sequence length.
 * @returns float32 [batch, 1, 1, n], [1, 1, n, n] or [batch, 1, n, n]; null when nothing is
 *   masked (no padding and not causal).
 * @throws RangeError when padding is not [batch, n].
 */
export function allowedKeys(
  padding: tf.Tensor | null | undefined,
  causal: boolean,
  n: number,
): tf.Tensor | null {
  if (padding != null && (padding.rank !== 2 || padding.shape[1] !== n))
    throw new RangeError(
      `mask: padding mask must have shape [batch, ${n}], got [${padding.shape.join(", ")}]`,
    );
  if (padding == null && !causal) return null;
  return tf.tidy(() => {
    let allowed: tf.Tensor | null = null;
    if (padding != null) {
      const real = tf.cast(tf.notEqual(padding, 0), "float32");
      allowed = tf.reshape(real, [padding.shape[0], 1, 1, n]);
    }
    if (causal) {
      const tri = new Float32Array(n * n);
      for (let i = 0; i < n; i++) for (let j = 0; j <= i; j++) tri[i * n + j] = 1;
      const c = tf.tensor4d(tri, [1, 1, n, n]);
      allowed = allowed === null ? c : tf.mul(allowed, c);
    }
    return allowed as tf.Tensor;
  });
}

/** Additive score offset for the mask: 0 where allowed, -1e9 where masked. Same shape. */
export function maskOffset(allowed: tf.Tensor): tf.Tensor {
  return tf.tidy(() => tf.mul(tf.sub(1, allowed), -1e9));
}
