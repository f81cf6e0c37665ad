import { tf } from "../backend.ts";
import { GELU_A, GELU_C, type Activation } from "./gelu.ts";
import { linear } from "./linear.ts";

export { gelu, geluDerivative, GELU_DERIVATIVE_MAX, geluErf, geluErfDerivative, GELU_ERF_DERIVATIVE_MAX } from "./gelu.ts";

/**
 * GELU, tanh approximation, on a tensor: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
 * (Hendrycks & Gimpel 2016). Same shape in and out. Its float64 derivative is
 * {@link geluDerivative}.
 */
export function geluTensor(x: tf.Tensor): tf.Tensor {
  return tf.tidy(() => {
    const cube = tf.mul(tf.mul(x, x), x);
    const u = tf.mul(tf.add(x, tf.mul(cube, GELU_A)), GELU_C);
    return tf.mul(tf.mul(x, 0.5), tf.add(tf.tanh(u), 1));
  });
}

/**
 * Exact GELU on a tensor: 0.5 x (1 + erf(x / sqrt 2)) (Hendrycks & Gimpel 2016; PyTorch's and
 * Hugging Face's "gelu"). Same shape in and out. Its float64 derivative is `geluErfDerivative`.
 *
 * @example geluErfTensor(tf.tensor([0, 1])) // [0, 0.8413]
 */
export function geluErfTensor(x: tf.Tensor): tf.Tensor {
  return tf.tidy(() => tf.mul(tf.mul(x, 0.5), tf.add(tf.erf(tf.mul(x, Math.SQRT1_2)), 1)));
}

/** The tensor function of an activation (gelu.ts ACTIVATIONS). */
export function activationTensor(name: Activation): (x: tf.Tensor) => tf.Tensor {
  return name === "gelu-erf" ? geluErfTensor : geluTensor;
}

/** The MLP's parameters: W1 [d, hidden], b1 [hidden], W2 [hidden, d], b2 [d]. */
export interface MlpParams {
  w1: tf.Tensor;
  b1: tf.Tensor;
  w2: tf.Tensor;
  b2: tf.Tensor;
}

/** Output of {@link mlp}: out [..., d] and the pre-activation h = x W1 + b1, [..., hidden]. */
export type MlpResult = {
  out: tf.Tensor;
  h: tf.Tensor;
};

/**
 * Position-wise MLP: out = GELU(x W1 + b1) W2 + b2 (Vaswani et al. 2017, with GELU as in ViT;
 * `activation` picks the tanh form, the default, or the exact erf form).
 * Its local Lipschitz rule is max_row ||W2 diag(gelu'(h_row)) W1||_2 (docs/math.md section 3),
 * which is why h is returned.
 *
 * @param x float32 [..., d].
 * @returns {out [..., d], h [..., hidden]}.
 * @throws RangeError on mismatched shapes (from {@link linear}).
 */
export function mlp(x: tf.Tensor, p: MlpParams, activation: Activation = "gelu-tanh"): MlpResult {
  return tf.tidy(() => {
    const h = linear(x, p.w1, p.b1);
    const out = linear(activationTensor(activation)(h), p.w2, p.b2);
    return { out, h };
  });
}
