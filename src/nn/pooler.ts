import { tf } from "../backend.ts";
import { linear } from "./linear.ts";

/**
 * BERT's pooler: tanh(x W + b) on the pooled token (Devlin et al. 2019; transformers'
 * BertPooler). Its local Lipschitz rule is in src/lipschitz/rules/pooler.ts (docs/math.md
 * section 3, "Pooler").
 *
 * @param x float32 [b, d]. @param w float32 [d, d]. @param b float32 [d].
 * @returns float32 [b, d], entries in (-1, 1).
 * @throws RangeError on mismatched shapes (from {@link linear}).
 * @example tanhPooler(tf.zeros([1, 4]), tf.eye(4), tf.zeros([4])) // zeros [1, 4]
 */
export function tanhPooler(x: tf.Tensor, w: tf.Tensor, b: tf.Tensor): tf.Tensor {
  return tf.tidy(() => tf.tanh(linear(x, w, b)));
}
