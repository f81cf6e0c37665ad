import { tf } from "../backend.ts";
import { crossEntropy } from "../train/loss.ts";
import {
  checkGradient,
  checkLogitRows,
  crossEntropyExcess,
  predictClasses,
  reportNonFiniteGradient,
  reportZeroGradient,
  type LogitsFn,
  type ZeroGradientFn,
} from "./loss.ts";
import type { AttackNorm, ResolvedAttackSettings } from "./options.ts";
import type { AttackContext, AttackSpec } from "./registry.ts";
import { ATTACK_DEFAULTS } from "./defaults.ts";
import { projectClip, randomStartPoint, signOf, unitDirection } from "./steps.ts";

export { crossEntropyExcess };

/** The loss, the prediction and the loss gradient of every example of a batch at one point. */
export interface LossPoint {
  /**
   * The loss per example [b], as APGD compares it: the cross-entropy of the true label or any
   * strictly increasing function of it (APGD only asks which of two values is larger).
   * {@link lossPoints} gives CE - ln C in nats ({@link crossEntropyExcess}).
   */
  loss: ArrayLike<number>;
  /** 1 where the model still predicts the true label [b]. */
  correct: Uint8Array;
  /** d CE_i / d x_i, x's shape (masked where the batch may not move); the caller disposes it. */
  grad: tf.Tensor;
}

/** x -> the {@link LossPoint} there. */
export type LossPointFn = (x: tf.Tensor) => LossPoint;

/**
 * A loss the APGD loop ascends: its batch sum as a tensor (whose input gradient gives each
 * example's own, as examples do not mix) and one row's value in float64 from the logits (what
 * the step-size rule compares). Cross-entropy here; the DLR losses in apgdDlr.ts and
 * apgdTargeted.ts.
 */
export interface AttackLoss {
  /** Name in messages, e.g. "cross-entropy". */
  name: string;
  /** The summed loss of a batch, a scalar: logits float32 [b, C], labels int32 [b]. */
  sum(logits: tf.Tensor, labels: tf.Tensor): tf.Scalar;
  /**
   * Row `row`'s loss in float64 from row-major logits [rows, C], or any strictly increasing
   * function of that row's term of `sum` (APGD only asks which of two values is larger).
   */
  value(logits: ArrayLike<number>, classes: number, row: number, label: number): number;
}

/**
 * The cross-entropy of the true label as APGD-CE ascends it: the float32 sum for the gradient,
 * {@link crossEntropyExcess} (CE - ln C in float64 from the logit differences) for the
 * comparisons.
 */
export const CROSS_ENTROPY_LOSS: AttackLoss = {
  name: "cross-entropy",
  sum: (logits, labels) => crossEntropy(logits, labels, "sum", "apgd"),
  value: crossEntropyExcess,
};

/**
 * Per-example loss, correctness and input gradient from one forward and one backward pass
 * (the gradient of the summed loss: row i is example i's own, as examples do not mix). With
 * the default loss the value is {@link crossEntropyExcess} (CE - ln C in float64 from the
 * logits, read back once per call), so APGD's comparisons see progress wherever the logits
 * change, at any logit scale; the gradient is the float32 cross-entropy's.
 *
 * @param logitsFn inputs -> logits [b, C], inference mode.
 * @param labels int32 [b] (kept by the caller).
 * @param mask zeroes the gradient entries that must not move (an input space's mask), or absent.
 * @param loss the loss ascended [{@link CROSS_ENTROPY_LOSS}].
 * A logit of -inf (a class the model rules out) is allowed: its loss stays finite (+inf when
 * it is the true class) and the gradient finite.
 * @throws InputError (from the returned function) when a row of logits holds NaN or +inf or
 *   is -inf for every class ({@link checkLogitRows}).
 * @example const at = lossPoints(inferenceLogits(model), labels)(x); at.grad.dispose();
 */
export function lossPoints(
  logitsFn: LogitsFn,
  labels: tf.Tensor,
  mask?: ((g: tf.Tensor) => tf.Tensor) | null,
  loss: AttackLoss = CROSS_ENTROPY_LOSS,
): LossPointFn {
  const truth = labels.dataSync(); // read once: the labels do not change between evaluations
  return (x) => {
    let predicted: tf.Tensor | null = null;
    let kept: tf.Tensor | null = null;
    const { value, grad } = tf.valueAndGrad((z: tf.Tensor) => {
      const logits = logitsFn(z);
      kept = tf.keep(logits);
      predicted = tf.keep(tf.argMax(logits, 1));
      return loss.sum(logits, labels);
    })(x);
    value.dispose();
    const logits = kept as unknown as tf.Tensor;
    const pred = (predicted as unknown as tf.Tensor).dataSync();
    const values = logits.dataSync();
    const c = logits.shape[1] as number;
    const correct = Uint8Array.from(pred, (p, i) => (p === truth[i] ? 1 : 0));
    tf.dispose([predicted as unknown as tf.Tensor, logits]);
    try {
      checkLogitRows(values, c);
    } catch (e) {
      grad.dispose();
      throw e;
    }
    const losses = Float64Array.from(pred, (_, i) => loss.value(values, c, i, truth[i]));
    if (mask === undefined || mask === null) return { loss: losses, correct, grad };
    const masked = tf.tidy(() => mask(grad));
    grad.dispose();
    return { loss: losses, correct, grad: masked };
  };
}

/**
 * APGD's checkpoints for N iterations (Croce and Hein 2020, section 3.2): p_0 = 0, p_1 = 0.22,
 * p_{j+1} = p_j + max(p_j - p_{j-1} - 0.03, 0.06), w_j = ceil(p_j N); the iterations in (0, N)
 * where the step size may be halved.
 *
 * @example apgdCheckpoints(10) // [3, 5, 6, 7, 8, 9]
 * @example apgdCheckpoints(100) // [22, 41, 57, 70, 80, 87, 93, 99]
 */
export function apgdCheckpoints(iterations: number): number[] {
  const p = [0, 0.22];
  while (p[p.length - 1] < 1) {
    const j = p.length - 1;
    p.push(p[j] + Math.max(p[j] - p[j - 1] - 0.03, 0.06));
  }
  const w = new Set<number>();
  for (const pj of p.slice(1)) {
    // Less 1e-9: p_j is a sum of decimals (0.57 is 0.5700000000000001 in float64).
    const c = Math.ceil(pj * iterations - 1e-9);
    if (c > 0 && c < iterations) w.add(c);
  }
  return [...w].sort((a, b) => a - b);
}

/** Momentum weight alpha and the checkpoint test's fraction rho, as in the paper. */
const ALPHA = 0.75;
const RHO = 0.75;

/** Example i (the first axis) from a where flags[i] is 1, else from b (a new tensor). */
function pick(flags: ArrayLike<number>, a: tf.Tensor, b: tf.Tensor): tf.Tensor {
  return tf.tidy(() => {
    const shape = [flags.length, ...a.shape.slice(1).map(() => 1)];
    const condition = tf.reshape(
      tf.tensor1d(
        Array.from(flags, (f) => f !== 0),
        "bool",
      ),
      shape,
    );
    return tf.where(tf.broadcastTo(condition, a.shape), a, b);
  });
}

/** A step of size eta_i (per example) along the ascent direction: sign(g) (l_inf) or g / ||g||_2 (l_2). */
function ascent(x: tf.Tensor, g: tf.Tensor, eta: Float64Array, norm: AttackNorm): tf.Tensor {
  return tf.tidy(() => {
    const b = x.shape[0] as number;
    const etaT = tf.reshape(tf.tensor1d(Float32Array.from(eta)), [
      b,
      ...x.shape.slice(1).map(() => 1),
    ]);
    return tf.add(x, tf.mul(etaT, norm === "linf" ? signOf(g) : unitDirection(g).direction));
  });
}

/** Options of {@link apgdWithLoss}. */
export interface ApgdOptions {
  /** Zeroes the entries of the random start that must not move (an input space's mask). */
  maskStart?: ((offset: tf.Tensor) => tf.Tensor) | null;
  /** Where the one zero-gradient warning of a call goes [console.warn]. */
  onWarning?: (message: string) => void;
  /**
   * Gets the per-example flags [b]: 1 where the gradient was exactly zero at one or more
   * iterates the model still classified correctly.
   */
  onZeroGradient?: ZeroGradientFn;
  /** Gets the per-example flags [b]: 1 where a gradient entry was NaN or infinite at one or more such iterates. */
  onNonFiniteGradient?: ZeroGradientFn;
  /** The attack's name in its warnings ["apgd"]. */
  who?: string;
  /** Gets each checkpoint's step (after that many steps) and the step sizes then in force [b] (diagnostics, tests). */
  onCheckpoint?: (step: number, eta: Float64Array) => void;
}

/**
 * APGD's start: x, or a random point of the ball when s.randomStart (seeded by s.seed, entries
 * that must not move masked by maskStart), with its loss point and its checked gradient.
 *
 * @returns the start `current`, its {@link LossPoint} and gradient g (the caller disposes
 *   current and g; the point's own grad is g or freed).
 * @throws what `at` or the gradient check throws, with nothing left allocated.
 */
function apgdStart(
  at: LossPointFn,
  x: tf.Tensor,
  s: ResolvedAttackSettings,
  maskStart: ApgdOptions["maskStart"],
  zero: Uint8Array,
  nonFinite: Uint8Array,
): { current: tf.Tensor; point: LossPoint; g: tf.Tensor } {
  const { eps, norm, clip } = s;
  const current = s.randomStart
    ? randomStartPoint(x, norm, eps, s.seed, clip, maskStart)
    : tf.clone(x);
  let point: LossPoint;
  try {
    point = at(current);
  } catch (e) {
    current.dispose();
    throw e;
  }
  try {
    return { current, point, g: checkGradient(point.grad, zero, nonFinite, point.correct) };
  } catch (e) {
    tf.dispose([current, point.grad]);
    throw e;
  }
}

/**
 * One APGD step from x_k = current with gradient g: z = P(x_k + eta sign(g)) (l_2:
 * eta g / ||g||_2); the first step is z, later ones
 * P(x_k + alpha (z - x_k) + (1 - alpha)(x_k - x_{k-1})), P the projection onto the ball around
 * x and the clip range.
 *
 * @returns x_{k+1}, a new tensor (current and previous are kept).
 */
function momentumStep(
  current: tf.Tensor,
  previous: tf.Tensor,
  g: tf.Tensor,
  x: tf.Tensor,
  eta: Float64Array,
  s: ResolvedAttackSettings,
  first: boolean,
): tf.Tensor {
  const { eps, norm, clip } = s;
  const z = tf.tidy(() => projectClip(ascent(current, g, eta, norm), x, eps, norm, clip));
  if (first) return z;
  const next = tf.tidy(() => {
    const moved = tf.add(
      current,
      tf.add(tf.mul(ALPHA, tf.sub(z, current)), tf.mul(1 - ALPHA, tf.sub(current, previous))),
    );
    return projectClip(moved, x, eps, norm, clip);
  });
  z.dispose();
  return next;
}

/**
 * APGD's test at a checkpoint, per example: restart (halve eta, in place, and go back to the
 * best point) when (1) fewer than rho = 75% of the `steps` steps since the last checkpoint raised
 * its loss, or (2) its eta was not halved at the last checkpoint and its best loss has not risen
 * since then.
 *
 * @returns 1 where the example restarts [b].
 */
function checkpointRule(
  raised: Uint32Array,
  steps: number,
  reducedLast: Uint8Array,
  bestAtCheckpoint: Float64Array,
  bestLoss: Float64Array,
  eta: Float64Array,
): Uint8Array {
  const restart = new Uint8Array(eta.length);
  for (let i = 0; i < eta.length; i++) {
    const fewRaises = raised[i] < RHO * steps;
    const stalled = !reducedLast[i] && bestAtCheckpoint[i] >= bestLoss[i];
    restart[i] = fewRaises || stalled ? 1 : 0;
    if (restart[i]) eta[i] /= 2;
  }
  return restart;
}

/**
 * The APGD loop (Croce and Hein 2020, Algorithm 1, as AutoAttack implements it) on the inputs x
 * with settings s: N = s.steps steps and N + 1 loss and gradient evaluations (the start and
 * every iterate). Step size eta = 2 eps per example at the start; the first step plain, later
 * ones with momentum alpha = 0.75: z = P(x_k + eta sign(g_k)) (l_2: eta g / ||g||_2),
 * x_{k+1} = P(x_k + alpha (z - x_k) + (1 - alpha)(x_k - x_{k-1})), P the projection onto the
 * ball and the valid range. At each checkpoint w_j (see {@link apgdCheckpoints}) an example's
 * eta is halved, and it goes back to its best point x_max (highest loss so far, with its
 * gradient; the momentum term then is x_max - x_{k-1}), when
 * (1) fewer than rho = 75% of the steps since w_{j-1} raised its loss, or
 * (2) its eta was not halved at w_{j-1} and its best loss has not risen since then
 * (at the first checkpoint: since the start).
 * Start: x, or a random point of the ball when s.randomStart (seeded by s.seed).
 *
 * The one departure from the paper is how losses are compared (issue 38): "raised" and "best"
 * compare the losses `at` gives, and {@link lossPoints} gives CE - ln C computed in float64
 * from the logit differences ({@link crossEntropyExcess}), not the float32 cross-entropy. It is
 * the same objective (a constant apart), so in exact arithmetic the rule is the paper's; but
 * where the logits are tiny (a model whose logits are scaled by 1e-10) the cross-entropy sits
 * at ln C + O(1e-10), below float32's resolution of 2.4e-7 there: every float32 loss was the
 * same number, no step "raised" it, and conditions (1) and (2) halved eta at every checkpoint
 * (10 steps: 2 eps down to 2 eps / 64), so APGD fell behind PGD. The difference form keeps the
 * logits' relative precision at any scale; the float64 reading of the logits [b, C] costs one
 * small read-back per evaluation, which the predictions needed anyway. (DLR, the paper's other
 * loss, is scale-free too, but it is another objective and needs 3 classes.)
 *
 * @param at x -> loss, prediction and gradient per example ({@link lossPoints}).
 * @param x clean inputs [b, ...] (not disposed).
 * @returns per example: an iterate the model misclassifies when one was found (the last such),
 *   else the iterate of highest loss; x's shape, inside the ball and the clip range (caller
 *   disposes).
 */
export function apgdWithLoss(
  at: LossPointFn,
  x: tf.Tensor,
  s: ResolvedAttackSettings,
  options: ApgdOptions = {},
): tf.Tensor {
  const b = x.shape[0] as number;
  const { eps, norm } = s;
  const zero = new Uint8Array(b);
  const nonFinite = new Uint8Array(b);
  const checkpoints = new Set(apgdCheckpoints(s.steps));
  const eta = new Float64Array(b).fill(2 * eps);
  const swap = (old: tf.Tensor, next: tf.Tensor) => (old.dispose(), next);
  const start = apgdStart(at, x, s, options.maskStart, zero, nonFinite);
  const first = start.point;
  let { current, g } = start;
  let previous = tf.clone(current);
  let best = tf.clone(current);
  let bestGrad = tf.clone(g);
  const bestLoss = Float64Array.from(first.loss);
  const found = Uint8Array.from(first.correct, (c) => (c ? 0 : 1));
  let adversarial = tf.clone(current);
  let lastLoss = Float64Array.from(first.loss);
  const raised = new Uint32Array(b);
  const reducedLast = new Uint8Array(b);
  let bestAtCheckpoint = Float64Array.from(bestLoss);
  let lastCheckpoint = 0;
  try {
    for (let k = 0; k < s.steps; k++) {
      const next = momentumStep(current, previous, g, x, eta, s, k === 0);
      previous.dispose();
      previous = current;
      current = next;
      g.dispose();
      const point = at(current);
      g = point.grad;
      // Flagged only where the iterate is still classified correctly: a zero gradient at an
      // input already broken does not matter (the DLR loss is constant where y is 3rd).
      g = checkGradient(g, zero, nonFinite, point.correct);
      const improved = new Uint8Array(b);
      for (let i = 0; i < b; i++) {
        if (point.loss[i] > lastLoss[i]) raised[i]++;
        if (point.loss[i] > bestLoss[i]) {
          bestLoss[i] = point.loss[i];
          improved[i] = 1;
        }
        if (!point.correct[i]) found[i] = 1;
      }
      lastLoss = Float64Array.from(point.loss);
      const wrong = Uint8Array.from(point.correct, (c) => (c ? 0 : 1));
      adversarial = swap(adversarial, pick(wrong, current, adversarial));
      best = swap(best, pick(improved, current, best));
      bestGrad = swap(bestGrad, pick(improved, g, bestGrad));
      const done = k + 1;
      if (!checkpoints.has(done)) continue;
      const restart = checkpointRule(
        raised,
        done - lastCheckpoint,
        reducedLast,
        bestAtCheckpoint,
        bestLoss,
        eta,
      );
      reducedLast.set(restart);
      raised.fill(0);
      lastCheckpoint = done;
      bestAtCheckpoint = Float64Array.from(bestLoss);
      options.onCheckpoint?.(done, Float64Array.from(eta));
      if (restart.some((r) => r)) {
        // Back to the best point with its gradient; the momentum term becomes x_max - x_{k-1}.
        previous = swap(previous, pick(restart, current, previous));
        current = swap(current, pick(restart, best, current));
        g = swap(g, pick(restart, bestGrad, g));
      }
    }
    const who = options.who ?? "apgd";
    reportZeroGradient(zero, who, norm, `at one or more of its ${s.steps + 1} iterates`, options);
    reportNonFiniteGradient(nonFinite, who, norm, options);
    return pick(found, adversarial, best);
  } finally {
    tf.dispose([current, previous, best, bestGrad, adversarial, g]);
  }
}

/**
 * APGD in any input space on a given loss (the APGD attacks' run): {@link apgdWithLoss} on the
 * batch's loss, its gradient masked where the batch may not move, run settings.restarts times:
 * the first run from the configured start, each later one from a new random start (seed
 * derived from settings.seed and the run's index), and an input the model still classifies
 * correctly takes a later run's result when that run breaks it. Zero and non-finite gradients
 * are OR-ed over all runs and reported once.
 *
 * @param loss the loss ascended (cross-entropy: {@link CROSS_ENTROPY_LOSS}; DLR: apgdDlr.ts).
 * @returns adversarial inputs, float32, batch.x's shape (caller disposes).
 * @throws InputError when a row of the model's logits holds NaN or +inf or is -inf for every
 *   class (checkLogitRows; a -inf logit alone is a masked class and allowed).
 * @example apgdRuns(context, CROSS_ENTROPY_LOSS)
 */
export function apgdRuns(context: AttackContext, loss: AttackLoss): tf.Tensor {
  const { batch, labels, settings } = context;
  const at = lossPoints(batch.logits, labels, batch.mask, loss);
  const zero = new Uint8Array(batch.size);
  const nonFinite = new Uint8Array(batch.size);
  const quiet: ApgdOptions = {
    maskStart: batch.mask,
    onWarning: () => {},
    onZeroGradient: (z) => z.forEach((v, i) => (zero[i] |= v)),
    onNonFiniteGradient: (z) => z.forEach((v, i) => (nonFinite[i] |= v)),
  };
  let result = apgdWithLoss(at, batch.x, settings, quiet);
  const truth = labels.dataSync();
  const broken = (t: tf.Tensor) =>
    Uint8Array.from(predictClasses(batch.logits, t), (p, i) => (p === truth[i] ? 0 : 1));
  try {
    // Which inputs the result breaks so far: read once, then updated with each run's gains.
    const done = settings.restarts > 1 ? broken(result) : null;
    for (let r = 1; done !== null && r < settings.restarts; r++) {
      if (done.every((b) => b === 1)) break;
      const seed = (settings.seed + Math.imul(r, 0x9e3779b9)) >>> 0;
      const next = apgdWithLoss(at, batch.x, { ...settings, randomStart: true, seed }, quiet);
      const after = broken(next);
      const take = Uint8Array.from(done, (b, i) => (b === 0 && after[i] === 1 ? 1 : 0));
      const merged = pick(take, next, result);
      tf.dispose([next, result]);
      result = merged;
      take.forEach((t, i) => (done[i] |= t));
    }
    const where =
      settings.restarts > 1
        ? `at one or more iterates of its ${settings.restarts} runs`
        : `at one or more of its ${settings.steps + 1} iterates`;
    reportZeroGradient(zero, context.who, settings.norm, where, context);
    reportNonFiniteGradient(nonFinite, context.who, settings.norm, context);
  } catch (e) {
    result.dispose();
    throw e;
  }
  return result;
}

/**
 * APGD-CE in any input space (the registered attack's run): {@link apgdRuns} on the
 * cross-entropy.
 *
 * @returns adversarial inputs, float32, batch.x's shape (caller disposes).
 * @throws as {@link apgdRuns}.
 * @example apgdIn({ batch: imageBatch(model, x, [0, 1]), kind: "image", labels: y, settings: resolveAttackOptions({ eps: 0.1, restarts: 3 }, "me"), who: "apgd" })
 */
export function apgdIn(context: AttackContext): tf.Tensor {
  return apgdRuns(context, CROSS_ENTROPY_LOSS);
}

/**
 * The option table the APGD attacks share (APGD-CE, APGD-DLR; APGD-T adds its targets):
 * steps [100], randomStart [true], restarts [1], seed [0].
 */
export const APGD_OPTIONS: AttackSpec["options"] = {
  steps: {
    default: ATTACK_DEFAULTS.apgdSteps,
    help: "steps per run (one more gradient evaluation); 100 as in the paper",
  },
  randomStart: {
    default: ATTACK_DEFAULTS.randomStart,
    help: "start from a random point of the ball",
  },
  restarts: { default: ATTACK_DEFAULTS.restarts, help: "runs from new random starts" },
  seed: { default: ATTACK_DEFAULTS.seed, help: "seed of the random start" },
};

/**
 * APGD-CE: Auto-PGD with the cross-entropy loss, untargeted (registered as "apgd").
 *
 * Paper: Croce and Hein 2020, "Reliable evaluation of adversarial robustness with an ensemble
 * of diverse parameter-free attacks", ICML (Algorithm 1). Norm: l_inf (steps along sign(g)) or
 * l_2 (along g / ||g||_2), projected onto the eps-ball and the valid range. Step size: no
 * setting; it starts at 2 eps per example and halves at the paper's checkpoints when the loss
 * stops rising (then the example restarts from its best point); momentum 0.75 after the first
 * step. Losses are compared as CE - ln C in float64 from the logit differences, so a loss that
 * float32 cannot resolve (logits scaled by 1e-10) does not halve the step at every checkpoint
 * (see {@link apgdWithLoss}). Returns per example a misclassified iterate when one was found,
 * else the iterate of highest loss (so, unlike PGD's last iterate, a success at any step counts).
 * Arguments: eps (radius, >= 0, input units), norm ["linf"], steps [100, as in the paper and
 * AutoAttack; --steps sets it, e.g. 10 to cut it for time] (steps per run, with one more loss
 * and gradient evaluation), randomStart [true], restarts [1] (runs from new random starts; an
 * input counts as broken when any run breaks it), seed [0] (evaluation derives one stream per
 * batch and radius from it). stepSize is not read.
 * Input range: images in the clip range ([0, 1]); token embeddings unbounded, padding rows
 * never moved.
 * Shapes: x float32 [b, ...] (images [b, H, W, C] or [b, H*W*C]; embeddings [b, n, d]),
 * labels [b]; returns x's shape.
 */
export const APGD_ATTACK: AttackSpec = {
  name: "apgd",
  label: "APGD-CE",
  summary:
    "Auto-PGD on the cross-entropy (Croce and Hein 2020): adaptive step size with momentum, the best iterate",
  options: APGD_OPTIONS,
  run: apgdIn,
};
