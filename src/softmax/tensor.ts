import { oneHotFloat, tf } from "../backend.ts";
import { sigmaFromRow, sigmaGradient } from "./sigma.ts";

/**
 * Tensor versions of sigma and its closed forms, for training (JaSMin) and for analysis on
 * the tfjs side. Each maps attention probabilities of shape [..., n] to [...], one value
 * per row. Computed in float32; they agree with the float64 functions to float32 precision.
 */

interface TopTwo {
  a: tf.Tensor;
  b: tf.Tensor;
  r: tf.Tensor;
  rest: tf.Tensor;
}

/**
 * p_(1), p_(2) and r = sum of the others for each row, through argMax and one-hot masks:
 * max() would be simpler, but its gradient builds a broadcast comparison over the whole
 * attention stack, which is slow on wasm (docs/performance.md).
 */
function topTwo(p: tf.Tensor): TopTwo {
  const n = p.shape[p.rank - 1];
  const first = oneHotFloat(tf.argMax(p, -1), n);
  const a = tf.sum(tf.mul(p, first), -1);
  const rest = tf.mul(p, tf.sub(1, first));
  const r = tf.sum(rest, -1);
  const second = oneHotFloat(tf.argMax(rest, -1), n);
  const b = tf.sum(tf.mul(rest, second), -1);
  return { a, b, r, rest };
}

function checkProbabilities(p: tf.Tensor, fn: string): void {
  if (p.rank < 1) throw new RangeError(`${fn}: p must have rank >= 1 ([..., n]), got a scalar`);
  if (p.dtype !== "float32") throw new TypeError(`${fn}: p must be float32, got ${p.dtype}`);
}

/**
 * sigmaTop2 per row (docs/math.md section 1): p_(1) (r + p_(2)) with r the sum of the other
 * entries. Differentiable by autodiff (first order).
 *
 * @param p attention probabilities, float32, shape [..., n].
 * @returns float32 tensor of shape [...].
 */
export function sigmaTop2Tensor(p: tf.Tensor): tf.Tensor {
  checkProbabilities(p, "sigmaTop2Tensor");
  return tf.tidy(() => {
    const { a, b, r } = topTwo(p);
    return tf.mul(a, tf.add(r, b));
  });
}

/**
 * sigmaQuad per row (docs/math.md section 1). Differentiable by autodiff; where the
 * discriminant is 0 (one-hot rows) the square root is taken of max(disc, 1e-30) so the
 * gradient stays finite.
 *
 * @param p attention probabilities, float32, shape [..., n].
 * @returns float32 tensor of shape [...].
 */
export function sigmaQuadTensor(p: tf.Tensor): tf.Tensor {
  checkProbabilities(p, "sigmaQuadTensor");
  return tf.tidy(() => {
    const { a, b, r, rest } = topTwo(p);
    const s = tf.sum(tf.square(rest), -1);
    const bigB = tf.sub(tf.add(tf.mul(a, r), b), s);
    const bigC = tf.mul(a, tf.sub(tf.mul(b, r), s));
    // sqrt'(0) is infinite (one-hot rows): a floor of 1e-30 keeps the gradient finite and
    // changes the value by at most 1e-15.
    const root = tf.sqrt(tf.maximum(tf.sub(tf.square(bigB), tf.mul(4, bigC)), 1e-30));
    return tf.div(tf.add(bigB, root), 2);
  });
}

/**
 * Exact sigma per row with its analytic gradient d sigma / d p_k = v_k^2 - 2 (p.v) v_k
 * (docs/math.md section 1). The forward pass reads the probabilities back to JS and solves the
 * secular equation in float64 (the iteration has no fixed-size tensor form); the gradient
 * is recomputed from the saved input in the backward pass.
 *
 * @param p attention probabilities, float32, shape [..., n].
 * @returns float32 tensor of shape [...].
 */
export function sigmaTensor(p: tf.Tensor): tf.Tensor {
  checkProbabilities(p, "sigmaTensor");
  const n = p.shape[p.rank - 1];
  const outShape = p.shape.slice(0, -1);
  const op = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
    const input = args[0] as tf.Tensor;
    (args[1] as tf.GradSaveFunc)([input]);
    const data = input.dataSync();
    const rows = n === 0 ? 0 : data.length / n;
    const values = new Float32Array(rows);
    for (let row = 0; row < rows; row++) values[row] = sigmaFromRow(data, row * n, n);
    return {
      value: tf.tensor(values, outShape, "float32"),
      gradFunc: (dy: tf.Tensor | tf.Tensor[], saved: tf.Tensor[]) => {
        const src = saved[0].dataSync();
        const grad = new Float32Array(src.length);
        for (let row = 0; row < rows; row++) {
          const g = sigmaGradient(src, row * n, n).grad;
          grad.set(g, row * n);
        }
        return [tf.mul(tf.expandDims(dy as tf.Tensor, -1), tf.tensor(grad, saved[0].shape, "float32"))];
      },
    };
  });
  return op(p);
}
