import { tf } from "../backend.ts";
import type { AttentionParams, AttentionResult, L2AttentionParams } from "./attentionTypes.ts";
import { linear } from "./linear.ts";
import { maskOffset } from "./mask.ts";

export type { AttentionParams, AttentionResult } from "./attentionTypes.ts";

/**
 * Multi-head self-attention (Vaswani et al. 2017; notation of docs/math.md section 2):
 * P_h = rowsoftmax(Q_h K_h^T / sqrt(d_k)) with masked entries 0, out = [P_1 V_1, ..., P_H V_H] W_O + b_O.
 *
 * Formulated for wasm (docs/performance.md): one [b*n, d] x [d, 3d] matmul for Q, K, V; reshape to
 * [b, n, 3h, d_k] and one rank-4 transpose to [b, 3h, n, d_k]; Q K^T as matMul with transposeB.
 * Masking: scores get -1e9 at masked keys, then the softmax output is multiplied by the mask,
 * so masked probabilities are exactly 0 and so is the gradient reaching masked scores; a fully
 * masked query row has P = 0 and a zero head output (the layer output row is then b_O), with no
 * NaN in forward or backward.
 *
 * @param x float32 [b, n, d].
 * @param heads number of heads; must divide d.
 * @param allowed optional float32 mask broadcastable to [b, heads, n, n] (see mask.ts), 1 = may attend.
 * @throws RangeError when x is not rank 3, d is not divisible by heads, or weights have wrong
 *   shapes; when p has no key weight wk (an L2 layer's parameters, l2Attention.ts).
 */
export function multiHeadAttention(
  x: tf.Tensor,
  p: AttentionParams | L2AttentionParams,
  heads: number,
  allowed: tf.Tensor | null = null,
): AttentionResult {
  if (x.rank !== 3)
    throw new RangeError(`attention: x must be [batch, n, d], got [${x.shape.join(", ")}]`);
  const [b, n, d] = x.shape;
  if (d % heads !== 0)
    throw new RangeError(`attention: d = ${d} is not divisible by heads = ${heads}`);
  if (!("wk" in p) || p.wk === undefined)
    throw new RangeError(
      "attention: p has no key weight wk (L2 attention's tied parameters: use l2MultiHeadAttention)",
    );
  for (const [name, w] of [
    ["wq", p.wq],
    ["wk", p.wk],
    ["wv", p.wv],
    ["wo", p.wo],
  ] as const)
    if (w.rank !== 2 || w.shape[0] !== d || w.shape[1] !== d)
      throw new RangeError(`attention: ${name} must be [${d}, ${d}], got [${w.shape.join(", ")}]`);
  const dk = d / heads;
  const hasQkvBias = p.bq !== undefined && p.bk !== undefined && p.bv !== undefined;
  return tf.tidy(() => {
    // Three projections, not one with concatenated weights and a split: tfjs's wasm slice
    // copies its whole input for each part, so the split cost more than the matmuls it saved
    // (docs/performance.md, "Where a training step's time goes").
    const flat = tf.reshape(x, [b * n, d]);
    const project = (w: tf.Tensor, bias: tf.Tensor | undefined): tf.Tensor =>
      tf.transpose(tf.reshape(linear(flat, w, bias), [b, n, heads, dk]), [0, 2, 1, 3]);
    const q = project(p.wq, hasQkvBias ? p.bq : undefined);
    const k = project(p.wk, hasQkvBias ? p.bk : undefined);
    const v = project(p.wv, hasQkvBias ? p.bv : undefined);
    let scores = tf.matMul(tf.mul(q, 1 / Math.sqrt(dk)), k, false, true);
    if (allowed !== null) scores = tf.add(scores, maskOffset(allowed));
    let probs = tf.softmax(scores, -1);
    if (allowed !== null) probs = tf.mul(probs, allowed);
    const context = tf.reshape(tf.transpose(tf.matMul(probs, v), [0, 2, 1, 3]), [b * n, d]);
    const out = tf.reshape(linear(context, p.wo, p.bo), [b, n, d]);
    return { out, q, k, v, p: probs };
  });
}
