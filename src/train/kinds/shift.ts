import { tf } from "../../backend.ts";
import type { SeededRng } from "../../data/dataset.ts";

/**
 * Random-shift augmentation of image batches: each image moves by a whole number of pixels,
 * drawn uniformly from [-maxShift, maxShift] for each axis, and the pixels that enter from the
 * border take `fill` (the data's lowest value: black for MNIST). The standard augmentation for
 * small digit data sets; it keeps a ViT from memorising the 8,000 embedded training digits.
 * The shift itself is tfjs's projective image transform (tf.image.transform, nearest neighbour,
 * exact for whole-pixel shifts).
 */

/**
 * Per-image shifts [dx, dy] drawn from `rng` (2 draws per image, x first).
 *
 * @returns Int32Array [2 * count]: dx of image i at 2i, dy at 2i + 1, each in [-maxShift, maxShift].
 * @example drawShifts(2, 1, new SeededRng(0)) // e.g. Int32Array [1, -1, 0, 1]
 */
export function drawShifts(count: number, maxShift: number, rng: SeededRng): Int32Array {
  const shifts = new Int32Array(2 * count);
  for (let i = 0; i < shifts.length; i++) shifts[i] = rng.int(2 * maxShift + 1) - maxShift;
  return shifts;
}

/**
 * Images shifted by the given offsets: pixel (x, y) of image i becomes pixel
 * (x + dx_i, y + dy_i); what enters from the border is `fill`.
 *
 * @param images float32 [b, height * width * channels], HWC per image.
 * @param shape [height, width, channels] of one image.
 * @param shifts [2 * b] from {@link drawShifts}.
 * @returns float32 [b, height * width * channels] (a new tensor).
 * @example shiftImages(tf.tensor2d([[1, 2, 3, 4]]), [2, 2, 1], Int32Array.of(1, 0), 0) // [[0, 1, 0, 3]]
 */
export function shiftImages(images: tf.Tensor2D, shape: readonly [number, number, number], shifts: Int32Array, fill: number): tf.Tensor2D {
  const b = images.shape[0];
  return tf.tidy(() => {
    // Output (x, y) reads input (x - dx, y - dy): a0 = 1, a2 = -dx, b1 = 1, b2 = -dy.
    const transforms = new Float32Array(8 * b);
    for (let i = 0; i < b; i++) transforms.set([1, 0, -shifts[2 * i], 0, 1, -shifts[2 * i + 1], 0, 0], 8 * i);
    const moved = tf.image.transform(tf.reshape(images, [b, ...shape]) as tf.Tensor4D, tf.tensor2d(transforms, [b, 8]), "nearest", "constant", fill);
    return tf.reshape(moved, [b, shape[0] * shape[1] * shape[2]]) as tf.Tensor2D;
  });
}
