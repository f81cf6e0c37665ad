import { tf } from "../../backend.ts";
import { jvp, outputShape, vjp, type TensorFn } from "./jacobianProducts.ts";
import { spectralNorm } from "../linalg.ts";

/**
 * The full dense Jacobian of a tensor map for small sizes: the test oracle of the power
 * iteration and of the input Jacobian (docs/math.md section 5).
 */

/** A dense Jacobian: row-major rows x cols float64 entries, rows = output size M, cols = input size D. */
export interface DenseJacobian {
  data: Float64Array;
  rows: number;
  cols: number;
}

/** Options of {@link denseJacobian}. */
export interface DenseJacobianOptions {
  /**
   * "vjp": M gradient calls, row i = e_i^T Df(x) (default); "jvp": D double-VJP calls,
   * column j = Df(x) e_j (an independent path, slower).
   */
  mode?: "vjp" | "jvp";
  /** Refuse when M * D exceeds this (default 1e6 entries). */
  maxEntries?: number;
}

/**
 * Dense Jacobian of f at x, flattened: entry (i, j) = d f(x)_i / d x_j over the row-major
 * flattening of f(x) and x. Products are float32, the result is stored as float64.
 *
 * @param f deterministic differentiable map on float32 tensors.
 * @param x float32 point, any shape.
 * @returns {data, rows: f(x).size, cols: x.size}. Leaves tf.memory().numTensors unchanged.
 * @throws RangeError when rows * cols exceeds options.maxEntries; as vjp/jvp otherwise.
 */
export function denseJacobian(
  f: TensorFn,
  x: tf.Tensor,
  options: DenseJacobianOptions = {},
): DenseJacobian {
  const outShape = outputShape(f, x);
  const rows = outShape.reduce((a, b) => a * b, 1);
  const cols = x.size;
  const maxEntries = options.maxEntries ?? 1e6;
  if (rows * cols > maxEntries)
    throw new RangeError(
      `denseJacobian: ${rows} x ${cols} entries exceed maxEntries = ${maxEntries}; use power iteration`,
    );
  const data = new Float64Array(rows * cols);
  if (options.mode === "jvp") {
    const basis = new Float32Array(cols);
    for (let j = 0; j < cols; j++) {
      basis.fill(0);
      basis[j] = 1;
      const col = tf.tidy(() => jvp(f, x, tf.tensor(basis, x.shape, "float32"), outShape));
      const c = col.dataSync();
      col.dispose();
      for (let i = 0; i < rows; i++) data[i * cols + j] = c[i];
    }
  } else {
    const basis = new Float32Array(rows);
    for (let i = 0; i < rows; i++) {
      basis.fill(0);
      basis[i] = 1;
      const row = tf.tidy(() => vjp(f, x, tf.tensor(basis, outShape, "float32")));
      data.set(row.dataSync(), i * cols);
      row.dispose();
    }
  }
  return { data, rows, cols };
}

/**
 * The exact local Lipschitz constant ||Df(x)||_2 from the dense Jacobian (largest singular
 * value, float64 Jacobi on the smaller Gram matrix). For small sizes only.
 *
 * @throws as {@link denseJacobian}.
 */
export function denseLipschitz(
  f: TensorFn,
  x: tf.Tensor,
  options: DenseJacobianOptions = {},
): number {
  const j = denseJacobian(f, x, options);
  return spectralNorm(j.data, j.rows, j.cols);
}
