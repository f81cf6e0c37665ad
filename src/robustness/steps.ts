import { tf } from "../backend.ts";
import type { ClipRange } from "./loss.ts";
import { randomOffsetL2, randomOffsetLinf } from "./random.ts";

/**
 * The building blocks of FGSM and PGD, exposed so each can be tested on its own: the start
 * point, one ascent step with its projection onto the epsilon ball, and the clipping to the
 * valid input range. Every function takes and returns float32 tensors [b, ...] (b examples,
 * any trailing shape; the l_2 norm is taken per example over all trailing entries) and
 * returns a new tensor, leaving its inputs alone. The clip range defaults to [0, 1].
 */

/** Clips to the valid range [low, high]. */
function clipTo(x: tf.Tensor, clip: ClipRange): tf.Tensor {
  return tf.clipByValue(x, clip[0], clip[1]);
}

/** Per-example l_2 norm [b, 1] of a [b, D] matrix, safe from underflow (scaled by the max |entry| first). */
function rowNorms(flat: tf.Tensor2D): { scale: tf.Tensor; scaled: tf.Tensor; norm: tf.Tensor } {
  const scale = tf.max(tf.abs(flat), 1, true);
  const scaled = tf.div(flat, tf.where(tf.greater(scale, 0), scale, tf.onesLike(scale)));
  const norm = tf.mul(tf.sqrt(tf.sum(tf.square(scaled), 1, true)), scale);
  return { scale, scaled, norm };
}

/**
 * Projects x onto the l_inf ball of radius eps around x0: x0 + clip(x - x0, -eps, eps).
 *
 * @param eps radius >= 0 (input units).
 */
export function projectLinf(x: tf.Tensor, x0: tf.Tensor, eps: number): tf.Tensor {
  return tf.tidy(() => tf.add(x0, tf.clipByValue(tf.sub(x, x0), -eps, eps)));
}

/**
 * Projects x onto the l_2 ball of radius eps around x0, per example: x0 + delta * min(1, eps /
 * ||delta||_2) with delta = x - x0 (delta = 0 stays 0; no NaN).
 *
 * @param eps radius >= 0 (input units, l_2 over all entries of one example).
 */
export function projectL2(x: tf.Tensor, x0: tf.Tensor, eps: number): tf.Tensor {
  return tf.tidy(() => {
    const b = x.shape[0] as number;
    const delta = tf.reshape(tf.sub(x, x0), [b, -1]) as tf.Tensor2D;
    const { norm } = rowNorms(delta);
    const factor = tf.minimum(1, tf.div(eps, tf.maximum(norm, 1e-30)));
    return tf.add(x0, tf.reshape(tf.mul(delta, factor), x.shape));
  });
}

/**
 * The l_inf start point: clip(x + proj(offset)), the offset first clamped to [-eps, eps] when
 * eps is given. The start is clipped to the valid range BEFORE the first gradient, so
 * x = [0, 0.5, 1], offset [-0.1, 0.05, 0.1] starts at [0, 0.55, 1].
 *
 * @param offset same shape as x (e.g. {@link randomOffsetLinf}).
 */
export function pgdStartLinf(
  x: tf.Tensor,
  offset: tf.Tensor,
  eps?: number,
  clip: ClipRange = [0, 1],
): tf.Tensor {
  return tf.tidy(() => {
    const d = eps === undefined ? offset : tf.clipByValue(offset, -eps, eps);
    return clipTo(tf.add(x, d), clip);
  });
}

/**
 * The l_2 start point: clip(x + offset), the offset first projected onto the l_2 ball of
 * radius eps (per example) when eps is given. Clipping only moves entries towards x (x is in
 * range), so the start stays in the ball.
 *
 * @param offset same shape as x (e.g. {@link randomOffsetL2}).
 */
export function pgdStartL2(
  x: tf.Tensor,
  offset: tf.Tensor,
  eps?: number,
  clip: ClipRange = [0, 1],
): tf.Tensor {
  return tf.tidy(() => {
    const start = eps === undefined ? tf.add(x, offset) : projectL2(tf.add(x, offset), x, eps);
    return clipTo(start, clip);
  });
}

/**
 * The sign of every entry: 1, -1, or 0 where the entry is 0 (or NaN), exact at every magnitude.
 * Not tf.sign: tfjs-backend-wasm 4.22's Sign kernel returns 0 for |x| below float32's epsilon
 * (1.19e-7), which left every l_inf attack without a direction on the gradient entries below it
 * (all of them for a model whose logits are scaled by 1e-8: FGSM then broke no input). Call
 * inside tf.tidy.
 *
 * @param t float32, any shape; @returns float32, t's shape.
 * @example signOf(tf.tensor1d([1e-9, -3, 0])) // [1, -1, 0] (tf.sign on wasm: [0, -1, 0])
 */
export function signOf(t: tf.Tensor): tf.Tensor {
  return tf.sub(tf.cast(tf.greater(t, 0), "float32"), tf.cast(tf.less(t, 0), "float32"));
}

/**
 * One l_inf PGD step (Madry et al. 2018): clip(proj_{B_inf(x0, eps)}(x + stepSize * sign(grad))).
 * A zero gradient entry leaves its coordinate where it is; any other moves, however small
 * ({@link signOf}). E.g. x = x0 = [0.98, 0.02], sign
 * [+1, -1], eps 0.05, step 0.05 gives [1, 0].
 *
 * @param x current point; @param x0 the clean input; @param grad loss gradient at x.
 * @param eps ball radius >= 0; @param stepSize alpha >= 0 (input units).
 */
export function pgdStepLinf(
  x: tf.Tensor,
  x0: tf.Tensor,
  grad: tf.Tensor,
  eps: number,
  stepSize: number,
  clip: ClipRange = [0, 1],
): tf.Tensor {
  return tf.tidy(() =>
    projectClip(tf.add(x, tf.mul(stepSize, signOf(grad))), x0, eps, "linf", clip),
  );
}

/**
 * One l_2 PGD step: clip(proj_{B_2(x0, eps)}(x + stepSize * grad / ||grad||_2)), the gradient
 * normalised per example. Where an example's gradient is exactly zero the step is zero (the
 * point is only re-projected and clipped, i.e. left unchanged when it was feasible), without
 * NaN; `onZeroGradient` is then called with the number of such examples (the caller decides
 * how to warn; counting costs one small read-back, so it happens only when given).
 *
 * @param eps ball radius >= 0; @param stepSize alpha >= 0 (input units, l_2 per example).
 */
export function pgdStepL2(
  x: tf.Tensor,
  x0: tf.Tensor,
  grad: tf.Tensor,
  eps: number,
  stepSize: number,
  clip: ClipRange = [0, 1],
  onZeroGradient?: (examples: number) => void,
): tf.Tensor {
  const [next, zeros] = tf.tidy(() => {
    const { direction, nonZero } = unitDirection(grad);
    const moved = tf.add(x, tf.mul(stepSize, direction));
    return [
      projectClip(moved, x0, eps, "l2", clip),
      tf.sum(tf.cast(tf.logicalNot(nonZero), "int32")),
    ];
  });
  const count = onZeroGradient ? zeros.dataSync()[0] : 0;
  zeros.dispose();
  if (count > 0) onZeroGradient!(count);
  return next;
}

/**
 * A random start of an iterative attack: x plus a seeded random offset (l_inf: uniform in the
 * box, l_2: uniform in the ball; random.ts), zeroed by `mask` where the inputs must not move,
 * projected onto the ball and clipped to the valid range (what PGD and APGD start from).
 *
 * @param x clean inputs [b, ...] (not disposed).
 * @param mask zeroes the offset's entries that must not move (an input space's mask), or absent.
 * @returns a new tensor, x's shape.
 * @example randomStartPoint(images, "linf", 0.1, 0, [0, 1])
 */
export function randomStartPoint(
  x: tf.Tensor,
  norm: "linf" | "l2",
  eps: number,
  seed: number,
  clip: ClipRange,
  mask?: ((offset: tf.Tensor) => tf.Tensor) | null,
): tf.Tensor {
  const offset = (norm === "linf" ? randomOffsetLinf : randomOffsetL2)(x.shape, eps, seed);
  const masked = mask === undefined || mask === null ? offset : tf.tidy(() => mask(offset));
  const start = (norm === "linf" ? pgdStartLinf : pgdStartL2)(x, masked, eps, clip);
  tf.dispose(masked === offset ? [offset] : [offset, masked]);
  return start;
}

/**
 * Projection onto the eps-ball around x0 in the norm, then clipping to the valid range (the
 * last part of every PGD and APGD step). Call inside tf.tidy.
 *
 * @example projectClip(moved, x0, 0.1, "linf", [0, 1])
 */
export function projectClip(
  x: tf.Tensor,
  x0: tf.Tensor,
  eps: number,
  norm: "linf" | "l2",
  clip: ClipRange,
): tf.Tensor {
  return clipTo(norm === "linf" ? projectLinf(x, x0, eps) : projectL2(x, x0, eps), clip);
}

/**
 * The l_2 ascent direction g / ||g||_2 of each example (the first axis), with g's shape, 0 where
 * g is 0; the rows are divided by their largest |entry| first, so that tiny gradients do not
 * underflow when squared. `nonZero` [b, 1] says which rows had a direction. Call inside tf.tidy.
 *
 * @example unitDirection(grad).direction // grad's shape, unit l_2 norm per example
 */
export function unitDirection(grad: tf.Tensor): { direction: tf.Tensor; nonZero: tf.Tensor } {
  const b = grad.shape[0] as number;
  const { scaled, scale } = rowNorms(tf.reshape(grad, [b, -1]) as tf.Tensor2D);
  const unitNorm = tf.sqrt(tf.sum(tf.square(scaled), 1, true));
  const nonZero = tf.greater(scale, 0);
  const direction = tf.div(scaled, tf.where(nonZero, unitNorm, tf.onesLike(unitNorm)));
  return { direction: tf.reshape(direction, grad.shape), nonZero };
}

/**
 * `full` with the rows `rows[j]` replaced by `sub`'s row j wherever take[j] is 1 (a new
 * tensor; neither input is disposed): how attacks that go on with a subset of the batch
 * (AutoAttack's members, APGD-T's targets, Square) put their results back.
 *
 * @param full [b, ...]; @param sub [rows.length, ...] (same trailing shape).
 * @param rows indices into full's first axis; @param take [rows.length] 0/1.
 * @example replaceRows(x, adv, [2, 5], Uint8Array.of(1, 0)) // x with row 2 from adv's row 0
 */
export function replaceRows(
  full: tf.Tensor,
  sub: tf.Tensor,
  rows: readonly number[],
  take: ArrayLike<number>,
): tf.Tensor {
  const b = full.shape[0] as number;
  const index = Int32Array.from({ length: b }, (_, i) => i);
  rows.forEach((i, j) => {
    if (take[j] !== 0) index[i] = b + j;
  });
  return tf.tidy(() => tf.gather(tf.concat([full, sub], 0), tf.tensor1d(index, "int32")));
}
