import { tf } from "../backend.ts";
import type { AttentionResult, L2AttentionParams } from "./attentionTypes.ts";
import { linear } from "./linear.ts";
import { maskOffset } from "./mask.ts";

export type { L2AttentionParams } from "./attentionTypes.ts";

/**
 * Multi-head L2 self-attention, Kim et al. 2021's L2-MHA (docs/math.md section 2, "L2
 * self-attention"): per head, with Q_h = X W^{Q,h} [n, d_k] and A^h = W^{Q,h} W^{Q,h}^T / sqrt(d_k),
 *   P_h = rowsoftmax(S), S_ij = -||q_i - q_j||^2 / sqrt(d_k) (masked entries exactly 0, a fully
 *   masked row 0, as in {@link multiHeadAttention}),
 *   head_h = P_h X A^h W^{V,h} + 1 b_V[h]^T = P_h (Q_h M_h / sqrt(d_k)) + 1 b_V[h]^T,
 *     M_h = W^{Q,h}^T W^{V,h} [d_k, d_k],
 *   out = [head_1, ..., head_H] W_O + b_O.
 * The value path goes through the tied query map: that is what makes the layer globally
 * Lipschitz (Kim et al. Theorem 3.2; the `kim` bound, src/lipschitz/rules/kim.ts).
 *
 * Scores are computed as S'_ij = (2 q_i . q_j - ||q_j||^2) / sqrt(d_k), which differs from S_ij by
 * the row constant ||q_i||^2 / sqrt(d_k): the softmax, hence P and the output, are the same, and
 * the large ||q_i||^2 never enters the float32 sum.
 *
 * @param x float32 [b, n, d].
 * @param heads number of heads; must divide d.
 * @param allowed optional float32 mask broadcastable to [b, heads, n, n] (mask.ts), 1 = may attend.
 * @returns as multiHeadAttention: out [b, n, d], q = k (the same tensor) [b, heads, n, d_k],
 *   v [b, heads, n, d_k] (the values X A^h W^{V,h} + b_V[h] that P_h averages), p [b, heads, n, n].
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
  if (p.bv !== undefined && (p.bv.rank !== 1 || p.bv.shape[0] !== d))
    throw new RangeError(`l2 attention: bv must be [${d}], got [${p.bv.shape.join(", ")}]`);
  const dk = d / heads;
  return tf.tidy(() => {
    const q4 = tf.reshape(linear(tf.reshape(x, [b * n, d]), p.wq), [b, n, heads, dk]);
    const q = tf.transpose(q4, [0, 2, 1, 3]); // [b, H, n, dk]
    // M_h = W^{Q,h}^T W^{V,h} / sqrt(d_k) [H, dk, dk]; values Q_h M_h (+ b_V[h]).
    const byHead = (w: tf.Tensor) => tf.transpose(tf.reshape(w, [d, heads, dk]), [1, 0, 2]);
    const m = tf.mul(tf.matMul(byHead(p.wq), byHead(p.wv), true, false), 1 / Math.sqrt(dk));
    const qh = tf.reshape(tf.transpose(q, [1, 0, 2, 3]), [heads, b * n, dk]);
    let v = tf.transpose(tf.reshape(tf.matMul(qh, m), [heads, b, n, dk]), [1, 0, 2, 3]);
    if (p.bv !== undefined) v = tf.add(v, tf.reshape(p.bv, [1, heads, 1, dk]));
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
