import { tf } from "../backend.ts";
import type { AttentionResult } from "./attention.ts";
import { linear } from "./linear.ts";
import { maskOffset } from "./mask.ts";

/**
 * Parameters of multi-head L2 self-attention (Kim, Papamakarios and Mnih 2021): ONE query/key
 * weight W_Q = W_K [d, d] (no separate key weight), W_V, W_O [d, d]; head h uses columns
 * h*d_k .. (h+1)*d_k - 1 of W_Q and W_V (d_k = d / heads) and rows h*d_k .. of W_O. Optional
 * biases bq = bk (tied) and bv [d] (config qkvBias); the output bias bo [d] is always present.
 */
export interface L2AttentionParams {
  wq: tf.Tensor;
  wv: tf.Tensor;
  wo: tf.Tensor;
  bq?: tf.Tensor;
  bv?: tf.Tensor;
  bo: tf.Tensor;
}

/**
 * Multi-head L2 self-attention (Kim et al. 2021, docs/math.md section 2, "L2 self-attention"):
 * per head Q_h = K_h = X W_Q[:, h] + b_Q[h] (tied), scores S_ij = -||q_i - k_j||^2 / sqrt(d_k),
 * P_h = rowsoftmax(S) over allowed keys (masked entries exactly 0, a fully masked row 0, as in
 * {@link multiHeadAttention}), out = [P_1 V_1, ..., P_H V_H] W_O + b_O with V = X W_V + b_V
 * (W_V is NOT tied to W_Q).
 *
 * Computed as S'_ij = (2 q_i . k_j - ||k_j||^2) / sqrt(d_k), which differs from S_ij by the row
 * constant ||q_i||^2 / sqrt(d_k): the softmax, hence P and the output, are the same, and the
 * large ||q_i||^2 never enters the float32 sum. The tied bias cancels from S (q_i - k_j does not
 * hold it), so it changes Q, K in the trace but not P.
 *
 * @param x float32 [b, n, d].
 * @param heads number of heads; must divide d.
 * @param allowed optional float32 mask broadcastable to [b, heads, n, n] (mask.ts), 1 = may attend.
 * @returns as multiHeadAttention: out [b, n, d], q = k (the same tensor) and v [b, heads, n, d_k], p [b, heads, n, n].
 * @throws RangeError when x is not rank 3, d is not divisible by heads, or weights have wrong shapes.
 * @example l2MultiHeadAttention(x, { wq, wv, wo, bo }, 2).p // [b, 2, n, n], rows sum to 1
 */
export function l2MultiHeadAttention(
  x: tf.Tensor,
  p: L2AttentionParams,
  heads: number,
  allowed: tf.Tensor | null = null,
): AttentionResult {
  if (x.rank !== 3)
    throw new RangeError(`l2 attention: x must be [batch, n, d], got [${x.shape.join(", ")}]`);
  const [b, n, d] = x.shape;
  if (d % heads !== 0)
    throw new RangeError(`l2 attention: d = ${d} is not divisible by heads = ${heads}`);
  for (const [name, w] of [
    ["wq", p.wq],
    ["wv", p.wv],
    ["wo", p.wo],
  ] as const)
    if (w.rank !== 2 || w.shape[0] !== d || w.shape[1] !== d)
      throw new RangeError(
        `l2 attention: ${name} must be [${d}, ${d}], got [${w.shape.join(", ")}]`,
      );
  if ((p.bq === undefined) !== (p.bv === undefined))
    throw new RangeError("l2 attention: give both bq and bv or neither");
  const dk = d / heads;
  return tf.tidy(() => {
    const w = tf.concat([p.wq, p.wv], 1);
    const bias = p.bq !== undefined ? tf.concat([p.bq, p.bv as tf.Tensor], 0) : undefined;
    const qv = linear(tf.reshape(x, [b * n, d]), w, bias);
    const split = tf.transpose(tf.reshape(qv, [b, n, 2 * heads, dk]), [0, 2, 1, 3]);
    const [q, v] = tf.split(split, 2, 1);
    const keyNorms = tf.reshape(tf.sum(tf.square(q), -1), [b, heads, 1, n]);
    const cross = tf.matMul(tf.mul(q, 2), q, false, true);
    let scores = tf.mul(tf.sub(cross, keyNorms), 1 / Math.sqrt(dk));
    if (allowed !== null) scores = tf.add(scores, maskOffset(allowed));
    let probs = tf.softmax(scores, -1);
    if (allowed !== null) probs = tf.mul(probs, allowed);
    const context = tf.reshape(tf.transpose(tf.matMul(probs, v), [0, 2, 1, 3]), [b * n, d]);
    const out = tf.reshape(linear(context, p.wo, p.bo), [b, n, d]);
    return { out, q, k: q, v, p: probs };
  });
}
