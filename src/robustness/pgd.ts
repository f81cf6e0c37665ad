import { tf } from "../backend.ts";
import type { TransformerClassifier } from "../nn/model.ts";
import {
  checkGradient,
  checkInputs,
  crossEntropyGradient,
  inferenceLogits,
  labelTensor,
  reportNonFiniteGradient,
  reportZeroGradient,
  type GradientFn,
  type Labels,
  type ZeroGradientFn,
} from "./loss.ts";
import { lossGradient } from "./inputSpace.ts";
import type { AttackContext, AttackSpec } from "./registry.ts";
import { ATTACK_DEFAULTS } from "./defaults.ts";
import {
  ATTACK_NORMS,
  defaultStepSize,
  resolveAttackOptions,
  type AttackNorm,
  type AttackSettings,
  type ResolvedAttackSettings,
} from "./options.ts";
import { pgdStartL2, pgdStartLinf, pgdStepL2, pgdStepLinf, randomStartPoint } from "./steps.ts";

export { ATTACK_NORMS, defaultStepSize, type AttackNorm };

/**
 * Options of {@link pgd}: the shared attack settings (norm, eps, steps, stepSize, randomStart,
 * seed, clip; options.ts) and PGD's own. Defaults in brackets.
 */
export interface PgdOptions extends AttackSettings {
  /**
   * An explicit start offset (same shape as x), used instead of the random one (tests,
   * replaying a run). It is projected onto the ball, added and clipped like the random one.
   */
  start?: tf.Tensor;
  /**
   * Zeroes the entries of the random start offset that must not move (an input space's
   * mask, e.g. padding rows of text), as a new tensor; absent = every entry may move.
   */
  maskStart?: (offset: tf.Tensor) => tf.Tensor;
  /**
   * Where the one warning of a call goes (some example's gradient was exactly zero at one or
   * more steps, in either norm) [console.warn].
   */
  onWarning?: (message: string) => void;
  /** Gets the per-example flags [b]: 1 where the gradient was exactly zero at one or more steps. */
  onZeroGradient?: ZeroGradientFn;
  /**
   * Gets the per-example flags [b]: 1 where a gradient entry was NaN or infinite at one or more
   * steps (the step then went along the finite entries only).
   */
  onNonFiniteGradient?: ZeroGradientFn;
}

/**
 * Validated options with defaults filled: the shared {@link resolveAttackOptions}.
 *
 * @param inputShape the inputs' shape, for the l_2 radius bound (optional).
 * @throws RangeError naming `who` and the bad option.
 */
export function resolvePgdOptions(
  options: PgdOptions,
  who = "pgd",
  inputShape?: readonly number[],
): ResolvedAttackSettings {
  return resolveAttackOptions(options, who, inputShape);
}

/**
 * PGD on any differentiable loss, given its input gradient (the loop of {@link pgd}, exposed
 * so tests can watch where the gradient is evaluated). Start: x0 plus the offset (the given
 * `start`, else a random point of the ball when randomStart, else none), projected onto the
 * ball and CLIPPED to the valid range before the first gradient. Then `steps` times:
 * l_inf x <- clip(proj(x + alpha sign(g))), l_2 x <- clip(proj(x + alpha g / ||g||_2)).
 * An example whose gradient is exactly zero at one or more steps is flagged (one warning per
 * call, options.onZeroGradient gets the flags): the attack could not move it there. A
 * gradient entry that is NaN or infinite is set to 0 for the step, and its example flagged
 * (options.onNonFiniteGradient).
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
  const o = resolvePgdOptions(options, "pgd", x.shape);
  checkInputs(x, o.clip, "pgd");
  if (options.start !== undefined && !tf.util.arraysEqual(options.start.shape, x.shape))
    throw new RangeError(
      `pgd: start must have the inputs' shape [${x.shape.join(", ")}], got [${options.start.shape.join(", ")}]`,
    );
  const zero = new Uint8Array(x.shape[0] as number);
  const nonFinite = new Uint8Array(x.shape[0] as number);
  const startFn = o.norm === "linf" ? pgdStartLinf : pgdStartL2;
  let current: tf.Tensor;
  if (options.start !== undefined) current = startFn(x, options.start, o.eps, o.clip);
  else if (o.randomStart)
    current = randomStartPoint(x, o.norm, o.eps, o.seed, o.clip, options.maskStart);
  else current = tf.clone(x);
  for (let k = 0; k < o.steps; k++) {
    let g: tf.Tensor | null = null;
    try {
      g = gradient(current);
      g = checkGradient(g, zero, nonFinite);
      const next =
        o.norm === "linf"
          ? pgdStepLinf(current, x, g, o.eps, o.stepSize, o.clip)
          : pgdStepL2(current, x, g, o.eps, o.stepSize, o.clip);
      current.dispose();
      current = next;
    } catch (e) {
      current.dispose();
      throw e;
    } finally {
      g?.dispose();
    }
  }
  try {
    reportZeroGradient(zero, "pgd", o.norm, `at one or more of its ${o.steps} steps`, options);
    reportNonFiniteGradient(nonFinite, "pgd", o.norm, options);
  } catch (e) {
    current.dispose();
    throw e;
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
 * @example pgd(model, images, labels, { eps: 8 / 255, steps: 10 }) // l_inf, random start, seed 0
 * @see PGD_ATTACK, the registered attack, and {@link pgdIn} for any input space.
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

/**
 * PGD in any input space: random start in the ball (masked where the batch may not move),
 * `steps` ascent steps on the (masked) loss gradient, each projected onto the eps-ball around
 * batch.x and clipped to batch.clip (no clipping for embeddings). Returns the last iterate.
 *
 * @returns adversarial inputs, float32, batch.x's shape (caller disposes).
 * @example pgdIn({ batch: imageBatch(model, x, [0, 1]), kind: "image", labels: y, settings: resolveAttackOptions({ eps: 0.1 }, "me"), who: "pgd" })
 */
export function pgdIn(context: AttackContext): tf.Tensor {
  const { batch, labels, settings } = context;
  return pgdWithGradient(lossGradient(batch, labels), batch.x, {
    ...settings,
    maskStart: batch.mask ?? undefined,
    onWarning: context.onWarning,
    onZeroGradient: context.onZeroGradient,
    onNonFiniteGradient: context.onNonFiniteGradient,
  });
}

/**
 * PGD: projected gradient descent, untargeted, with random start; returns the last iterate
 * (as torchattacks does).
 *
 * Paper: Madry, Makelov, Schmidt, Tsipras and Vladu 2018, "Towards Deep Learning Models
 * Resistant to Adversarial Attacks", ICLR. Norm: l_inf (steps along sign(g), projection onto
 * the box) or l_2 (steps along g / ||g||_2 per example, projection onto the ball), g the
 * gradient of the cross-entropy of the TRUE label, model in inference mode.
 * Arguments: eps (radius, >= 0, input units), norm ["linf"], steps [10], stepSize
 * [2.5 * eps / steps], randomStart [true: l_inf uniform in the box, l_2 uniform in the
 * ball], seed [0] (evaluation derives one stream per batch and radius from it).
 * Input range: images in the clip range ([0, 1]), every iterate clipped to it; token
 * embeddings unbounded (no clipping), padding rows never moved.
 * Shapes: x float32 [b, ...] (images [b, H, W, C] or [b, H*W*C]; embeddings [b, n, d]),
 * labels [b]; returns x's shape.
 */
export const PGD_ATTACK: AttackSpec = {
  name: "pgd",
  label: "PGD",
  summary: "projected gradient ascent from a random start, the last iterate",
  options: {
    steps: { default: ATTACK_DEFAULTS.steps, help: "ascent steps" },
    stepSize: { default: ATTACK_DEFAULTS.stepSize, help: "step size (null: 2.5 * eps / steps)" },
    randomStart: {
      default: ATTACK_DEFAULTS.randomStart,
      help: "start from a random point of the ball",
    },
    seed: { default: ATTACK_DEFAULTS.seed, help: "seed of the random start" },
  },
  run: pgdIn,
};
