import { tf } from "../backend.ts";

/**
 * Tensors as the workers receive them: their values, shape and dtype, which structured clone
 * carries (a tfjs tensor lives in one thread's backend and cannot be sent).
 */

/** A tensor's values, shape and dtype. */
export interface TensorData {
  data: Float32Array | Int32Array;
  shape: number[];
  dtype: "float32" | "int32";
}

/**
 * Rows [start, start + size) of a tensor whose values were read once (`values`), as
 * {@link TensorData} (a copy).
 *
 * @example sliceRows(await x.data(), x, 8, 4).shape // [4, ...x.shape.slice(1)]
 */
export function sliceRows(values: Float32Array | Int32Array, like: tf.Tensor, start: number, size: number): TensorData {
  return sliceData({ data: values, shape: like.shape, dtype: like.dtype === "int32" ? "int32" : "float32" }, start, size);
}

/**
 * Rows [start, start + size) of {@link TensorData} (a copy).
 *
 * @example sliceData({ data: new Float32Array(6), shape: [3, 2], dtype: "float32" }, 1, 2).shape // [2, 2]
 */
export function sliceData(d: TensorData, start: number, size: number): TensorData {
  const per = d.shape.slice(1).reduce((a, b) => a * b, 1);
  return { data: d.data.slice(start * per, (start + size) * per), shape: [size, ...d.shape.slice(1)], dtype: d.dtype };
}

/**
 * Consecutive [start, start + size) slices of `count` rows, `per` rows each (the last one
 * smaller), in order.
 *
 * @example contiguousSlices(10, 4) // [{ start: 0, size: 4 }, { start: 4, size: 4 }, { start: 8, size: 2 }]
 */
export function contiguousSlices(count: number, per: number): { start: number; size: number }[] {
  const slices: { start: number; size: number }[] = [];
  for (let start = 0; start < count; start += per) slices.push({ start, size: Math.min(per, count - start) });
  return slices;
}

/** The tensor of {@link TensorData} in this thread's backend (the caller disposes it). */
export function toTensor(d: TensorData): tf.Tensor {
  return tf.tensor(d.data, d.shape, d.dtype);
}
