import { fillNormal, mulberry32 } from "../nn/prng.ts";
import { tf } from "../backend.ts";

/**
 * Seeded random start offsets for PGD, drawn on the JS side (mulberry32) so they are the same
 * on every backend and machine.
 */

function checkShape(shape: readonly number[], eps: number, who: string): number {
  if (shape.length < 2 || !shape.every((s) => Number.isInteger(s) && s > 0))
    throw new RangeError(
      `${who}: shape must be [b, ...] with positive sizes, got [${shape.join(", ")}]`,
    );
  if (!Number.isFinite(eps) || eps < 0)
    throw new RangeError(`${who}: eps must be finite and >= 0, got ${eps}`);
  return shape.slice(1).reduce((a, c) => a * c, 1);
}

/**
 * Offsets uniform in the l_inf ball of radius eps: each entry Uniform(-eps, eps).
 *
 * @param shape [b, ...] (the inputs' shape).
 * @returns float32 tensor of that shape.
 * @throws RangeError on a bad shape or eps < 0 / non-finite.
 */
export function randomOffsetLinf(shape: readonly number[], eps: number, seed: number): tf.Tensor {
  checkShape(shape, eps, "randomOffsetLinf");
  const rand = mulberry32(seed);
  const size = shape.reduce((a, c) => a * c, 1);
  const out = new Float32Array(size);
  for (let i = 0; i < size; i++) out[i] = (2 * rand() - 1) * eps;
  return tf.tensor(out, shape.slice(), "float32");
}

/**
 * Offsets uniform in the l_2 ball of radius eps, per example: a uniform direction (a
 * standard normal vector normalised to length 1) times the radius eps * u^(1/D), u ~
 * Uniform(0, 1), D = entries per example, which is the uniform distribution on the ball
 * (for D = 784 the radius is almost always close to eps). torchattacks' PGDL2 uses radius
 * eps * u instead, which favours the centre.
 *
 * @param shape [b, ...] (the inputs' shape).
 * @returns float32 tensor of that shape; each example's offset has l_2 norm <= eps.
 * @throws RangeError on a bad shape or eps < 0 / non-finite.
 */
export function randomOffsetL2(shape: readonly number[], eps: number, seed: number): tf.Tensor {
  const d = checkShape(shape, eps, "randomOffsetL2");
  const b = shape[0];
  const rand = mulberry32(seed);
  const out = new Float32Array(b * d);
  const row = new Float32Array(d);
  for (let e = 0; e < b; e++) {
    let norm2 = 0;
    do {
      fillNormal(row, rand, 1);
      norm2 = 0;
      for (let i = 0; i < d; i++) norm2 += row[i] * row[i];
    } while (norm2 === 0);
    // Shrunk by one float32 ulp so rounding never puts the offset outside the ball.
    const radius = eps * Math.pow(rand(), 1 / d) * (1 - 2 ** -23);
    const k = radius / Math.sqrt(norm2);
    for (let i = 0; i < d; i++) out[e * d + i] = row[i] * k;
  }
  return tf.tensor(out, shape.slice(), "float32");
}
