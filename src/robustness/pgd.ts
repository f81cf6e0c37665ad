import { tf } from "../backend.ts";
import type { TransformerClassifier } from "../nn/model.ts";
import {
  checkClip,
  checkInputs,
  crossEntropyGradient,
  inferenceLogits,
  labelTensor,
  type ClipRange,
  type GradientFn,
  type Labels,
} from "./loss.ts";
import { randomOffsetL2, randomOffsetLinf } from "./random.ts";
import { pgdStartL2, pgdStartLinf, pgdStepL2, pgdStepLinf } from "./steps.ts";

/** The threat models: l_inf (every entry moves by at most eps) or l_2 (per-example Euclidean). */
export type AttackNorm = "linf" | "l2";

/** The norms, for validation. */
export const ATTACK_NORMS: readonly AttackNorm[] = ["linf", "l2"];

/** Options of {@link pgd}. Defaults in brackets. */
export interface PgdOptions {
  /** Threat model ["linf"]. */
  norm?: AttackNorm;
  /** Radius of the ball around the clean input, >= 0, in input units (pixels in [0, 1]). */
  eps: number;
  /** Ascent steps K >= 1 [10]. */
  steps?: number;
  /** Step size alpha >= 0 (input units; l_2: per example); null/undefined = 2.5 * eps / steps. */
  stepSize?: number | null;
  /** Start from a random point of the ball (clipped to the valid range) [true]. */
  randomStart?: boolean;
  /** Seed of the random start [0]. */
  seed?: number;
  /** Valid input range [[0, 1]]. */
  clip?: ClipRange;
  /**
   * An explicit start offset (same shape as x), used instead of the random one (tests,
   * replaying a run). It is projected onto the ball, added and clipped like the random one.
   */
  start?: tf.Tensor;
  /** Where the one warning of a call goes (an l_2 step met an exactly zero gradient) [console.warn]. */
  onWarning?: (message: string) => void;
}

/** The default step size rule, 2.5 * eps / steps (Madry et al. 2018). */
export function defaultStepSize(eps: number, steps: number): number {
  return (2.5 * eps) / steps;
}

/** Validated options with defaults filled. @throws RangeError naming the bad option. */
export function resolvePgdOptions(options: PgdOptions, who = "pgd") {
  const norm = options.norm ?? "linf";
  if (!ATTACK_NORMS.includes(norm))
    throw new RangeError(`${who}: norm must be linf or l2, got ${String(norm)}`);
  const { eps } = options;
  if (typeof eps !== "number" || !Number.isFinite(eps) || eps < 0)
    throw new RangeError(`${who}: eps must be a finite number >= 0, got ${eps}`);
  const steps = options.steps ?? 10;
  if (!Number.isInteger(steps) || steps < 1)
    throw new RangeError(`${who}: steps must be an integer >= 1, got ${steps}`);
  const stepSize = options.stepSize ?? defaultStepSize(eps, steps);
  if (!Number.isFinite(stepSize) || stepSize < 0)
    throw new RangeError(`${who}: stepSize must be a finite number >= 0, got ${stepSize}`);
  const seed = options.seed ?? 0;
  if (!Number.isFinite(seed))
    throw new RangeError(`${who}: seed must be a finite number, got ${seed}`);
  const clip = options.clip ?? ([0, 1] as const);
  checkClip(clip, who);
  return { norm, eps, steps, stepSize, randomStart: options.randomStart ?? true, seed, clip };
}

/**
 * PGD on any differentiable loss, given its input gradient (the loop of {@link pgd}, exposed
 * so tests can watch where the gradient is evaluated). Start: x0 plus the offset (the given
 * `start`, else a random point of the ball when randomStart, else none), projected onto the
 * ball and CLIPPED to the valid range before the first gradient. Then `steps` times:
 * l_inf x <- clip(proj(x + alpha sign(g))), l_2 x <- clip(proj(x + alpha g / ||g||_2)).
 *
 * @param gradient x -> d loss / d x (same shape; a new tensor, disposed here).
 * @param x clean inputs float32 [b, ...] inside the clip range (not disposed).
 * @returns adversarial inputs float32, x's shape, inside the ball and the clip range (caller
 *   disposes). Leaves no other tensor behind.
 * @throws RangeError on bad options, inputs outside the clip range, or a start of the wrong
 *   shape; TypeError when x is not float32.
 */
export function pgdWithGradient(
  gradient: GradientFn,
  x: tf.Tensor,
  options: PgdOptions,
): tf.Tensor {
  const o = resolvePgdOptions(options);
  checkInputs(x, o.clip, "pgd");
  if (options.start !== undefined && !tf.util.arraysEqual(options.start.shape, x.shape))
    throw new RangeError(
      `pgd: start must have the inputs' shape [${x.shape.join(", ")}], got [${options.start.shape.join(", ")}]`,
    );
  let warned = false;
  const warn = options.onWarning ?? ((m: string) => console.warn(m));
  const onZeroGradient = (count: number) => {
    if (warned) return;
    warned = true;
    warn(
      `pgd: the loss gradient is exactly zero for ${count} example(s); their l_2 step is zero (input left unchanged)`,
    );
  };
  const startFn = o.norm === "linf" ? pgdStartLinf : pgdStartL2;
  let current: tf.Tensor;
  if (options.start !== undefined) current = startFn(x, options.start, o.eps, o.clip);
  else if (o.randomStart) {
    const offset = (o.norm === "linf" ? randomOffsetLinf : randomOffsetL2)(x.shape, o.eps, o.seed);
    current = startFn(x, offset, o.eps, o.clip);
    offset.dispose();
  } else current = tf.clone(x);
  for (let k = 0; k < o.steps; k++) {
    const g = gradient(current);
    try {
      const next =
        o.norm === "linf"
          ? pgdStepLinf(current, x, g, o.eps, o.stepSize, o.clip)
          : pgdStepL2(current, x, g, o.eps, o.stepSize, o.clip, onZeroGradient);
      current.dispose();
      current = next;
    } finally {
      g.dispose();
    }
  }
  return current;
}

/**
 * Projected gradient descent (Madry et al. 2018, "Towards Deep Learning Models Resistant to
 * Adversarial Attacks", ICLR), untargeted, in input space, l_inf or l_2: K steps of ascent on
 * the cross-entropy of the TRUE label, model in inference mode, each step projected onto the
 * eps-ball around x and clipped to the valid range; random start (l_inf uniform in the box,
 * l_2 uniform in the ball, see random.ts), clipped before the first gradient. Returns the
 * last iterate (not the best one), as torchattacks does.
 *
 * @param model a ViT (any TransformerClassifier whose input is x).
 * @param x float32 images [b, H, W, C] or [b, H*W*C] in [0, 1] (the clip range).
 * @param labels true classes [b].
 * @returns adversarial inputs, float32, x's shape (caller disposes); ||x_adv - x|| <= eps in
 *   the chosen norm and inside the clip range. eps 0 returns x's values exactly.
 * @throws RangeError/TypeError on bad options, labels or inputs (see pgdWithGradient).
 */
export function pgd(
  model: TransformerClassifier,
  x: tf.Tensor,
  labels: Labels,
  options: PgdOptions,
): tf.Tensor {
  const y = labelTensor(labels, x.shape[0] as number, model.config.classes, "pgd");
  try {
    return pgdWithGradient(crossEntropyGradient(inferenceLogits(model), y), x, options);
  } finally {
    y.dispose();
  }
}
