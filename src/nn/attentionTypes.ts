import type { tf } from "../backend.ts";

/**
 * The parameters and results of the attention layers (attention.ts: dot-product,
 * l2Attention.ts: Kim et al.'s L2 attention), which both read.
 */

/**
 * Parameters of multi-head self-attention. W_Q, W_K, W_V, W_O are [d, d]; head h uses columns
 * h*d_k .. (h+1)*d_k - 1 of W_Q, W_K, W_V (d_k = d / heads) and rows h*d_k .. of W_O.
 * Q/K/V biases [d] are optional (config qkvBias); the output bias [d] is always present.
 */
export interface AttentionParams {
  wq: tf.Tensor;
  wk: tf.Tensor;
  wv: tf.Tensor;
  wo: tf.Tensor;
  bq?: tf.Tensor;
  bk?: tf.Tensor;
  bv?: tf.Tensor;
  bo: tf.Tensor;
}

/**
 * Output of multiHeadAttention (attention.ts) and l2MultiHeadAttention (l2Attention.ts): out [b, n, d]; per head Q, K, V [b, heads, n, d_k]
 * (Q = X W_Q + b_Q, unscaled); probabilities P [b, heads, n, n] (rows sum to 1 over allowed
 * keys, exactly 0 at masked keys, all 0 in a fully masked row).
 */
export type AttentionResult = {
  out: tf.Tensor;
  q: tf.Tensor;
  k: tf.Tensor;
  v: tf.Tensor;
  p: tf.Tensor;
};

/**
 * Parameters of multi-head L2 self-attention in Kim, Papamakarios and Mnih's form (L2-MHA, ICML
 * 2021, section 3.2): ONE query weight W_Q [d, d] that serves as the key's (W_K = W_Q) and enters
 * the value map too, W_V, W_O [d, d]; head h uses columns h*d_k .. (h+1)*d_k - 1 of W_Q and W_V
 * (W^{Q,h}, W^{V,h} [d, d_k], d_k = d / heads). Optional value bias bv [d] (config qkvBias), added
 * after the head's value map; no query bias: it cancels from the scores (q_i - q_j) and Kim et
 * al.'s value map X A^h has none. The output bias bo [d] is always present.
 */
export interface L2AttentionParams {
  wq: tf.Tensor;
  wv: tf.Tensor;
  wo: tf.Tensor;
  bv?: tf.Tensor;
  bo: tf.Tensor;
}
