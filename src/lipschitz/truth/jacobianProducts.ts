import { tf } from "../../backend.ts";

/**
 * Jacobian products of a tensor function f: R^D -> R^M at a point x, the building blocks of the
 * true-value estimators (docs/math.md section 5).
 *
 * tfjs 4.22 has reverse mode only (docs/design.md). The vector-Jacobian product (VJP) is one
 * gradient call: u^T Df(x) = grad_x <f(x), u>. The Jacobian-vector product (JVP) comes from the
 * "double-VJP trick": g(u) = Df(x)^T u is LINEAR in the cotangent u, so
 *   grad_u <g(u), v> = Df(x) v,
 * for any u (we take u = 0). tfjs records the ops of the inner backward pass on the outer
 * tape, so the outer gradient differentiates the inner backward pass with respect to u. Only
 * the path from u matters, and along it every op is linear in u (the gradient functions of
 * softmax, exp, tanh ... multiply u by saved forward values), so no second derivative of
 * softmax or exp is needed (those throw in tfjs). Cost: one forward and two backward passes.
 */

/** A differentiable map from a float32 tensor to a float32 tensor (any shapes). */
export type TensorFn = (x: tf.Tensor) => tf.Tensor;

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((s, i) => s === b[i]);
}

function checkFloat(name: string, t: tf.Tensor): void {
  if (t.dtype !== "float32")
    throw new TypeError(`jacobian products: ${name} must be float32, got ${t.dtype}`);
}

/**
 * The shape of f(x) (runs f once inside tf.tidy; nothing is kept).
 *
 * @throws whatever f throws.
 */
export function outputShape(f: TensorFn, x: tf.Tensor): number[] {
  return tf.tidy(() => {
    const y = f(x);
    return y.shape.slice();
  }) as unknown as number[];
}

/**
 * Vector-Jacobian product u^T Df(x) = grad_x <f(x), u>.
 *
 * @param f differentiable map; must not depend on anything random (dropout off).
 * @param x float32, any shape (the point; not modified, not disposed).
 * @param u float32 cotangent, the shape of f(x).
 * @returns float32 tensor of x's shape (the caller owns it). tf.memory().numTensors grows by
 *   exactly one (the result).
 * @throws TypeError when x, u or f(x) is not float32; RangeError when u's shape is not f(x)'s.
 */
export function vjp(f: TensorFn, x: tf.Tensor, u: tf.Tensor): tf.Tensor {
  checkFloat("x", x);
  checkFloat("u", u);
  return tf.tidy(() => {
    const scalar = (xs: tf.Tensor): tf.Scalar => {
      const y = f(xs);
      checkFloat("f(x)", y);
      if (!sameShape(y.shape, u.shape))
        throw new RangeError(
          `vjp: cotangent has shape [${u.shape.join(", ")}], f(x) has [${y.shape.join(", ")}]`,
        );
      return tf.sum(tf.mul(y, u));
    };
    return tf.grad(scalar)(x);
  });
}

/**
 * Jacobian-vector product Df(x) v by the double-VJP trick (see the module comment).
 *
 * @param f differentiable map (deterministic).
 * @param x float32, any shape.
 * @param v float32 tangent, x's shape.
 * @param outShape the shape of f(x) when known (saves one forward pass); computed otherwise.
 * @returns float32 tensor of f(x)'s shape (the caller owns it); numTensors grows by one.
 * @throws TypeError on non-float32 inputs; RangeError when v's shape is not x's or outShape
 *   is wrong.
 */
export function jvp(f: TensorFn, x: tf.Tensor, v: tf.Tensor, outShape?: number[]): tf.Tensor {
  checkFloat("x", x);
  checkFloat("v", v);
  if (!sameShape(x.shape, v.shape))
    throw new RangeError(
      `jvp: tangent has shape [${v.shape.join(", ")}], x has [${x.shape.join(", ")}]`,
    );
  const shape = outShape ?? outputShape(f, x);
  return tf.tidy(() => {
    const u0 = tf.zeros(shape);
    const inner = (u: tf.Tensor): tf.Scalar => tf.sum(tf.mul(vjp(f, x, u), v));
    return tf.grad(inner)(u0);
  });
}
