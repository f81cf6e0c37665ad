import { InputError } from "../util/errors.ts";
import { tf } from "../backend.ts";
import { crossEntropy } from "../train/loss.ts";
import type { TransformerClassifier } from "../nn/model.ts";
// The threat model's type from defaults.ts (options.ts, which names it AttackNorm, imports this file).
import type { DefaultNorm as AttackNorm } from "./defaults.ts";

/**
 * What the attacks share: the loss they ascend (cross-entropy on the true label, model in
 * inference mode), its input gradient, predictions, and the checks on inputs and labels.
 */

/** Class labels: an int32 tensor [b], an Int32Array or an array of integers in 0..classes-1. */
export type Labels = tf.Tensor | Int32Array | readonly number[];

/** The valid input range [low, high] every adversarial input is clipped to (images: [0, 1]). */
export type ClipRange = readonly [number, number];

/** A map from inputs to the gradient of the attack loss at them (same shape as the input). */
export type GradientFn = (x: tf.Tensor) => tf.Tensor;

/** Inputs [b, ...] to logits float32 [b, classes] (inference mode), each row its own example's. */
export type LogitsFn = (x: tf.Tensor) => tf.Tensor;

/**
 * Checks a clip range.
 *
 * @throws RangeError unless low and high are finite and low < high.
 */
export function checkClip(clip: ClipRange, who: string): void {
  if (
    !Array.isArray(clip) ||
    clip.length !== 2 ||
    !Number.isFinite(clip[0]) ||
    !Number.isFinite(clip[1]) ||
    !(clip[0] < clip[1])
  )
    throw new RangeError(
      `${who}: clip must be [low, high] with finite low < high, got ${JSON.stringify(clip)}`,
    );
}

/**
 * Checks an input batch: float32, rank >= 2 ([b, ...]), every value finite and inside `clip`.
 *
 * @throws TypeError when x is not float32; RangeError on rank < 2, an empty batch, a
 *   non-finite value or a value outside the clip range.
 */
export function checkInputs(x: tf.Tensor, clip: ClipRange, who: string): void {
  if (x.dtype !== "float32") throw new TypeError(`${who}: inputs must be float32, got ${x.dtype}`);
  if (x.rank < 2 || x.shape[0] === 0)
    throw new RangeError(
      `${who}: inputs must be a non-empty batch [b, ...], got [${x.shape.join(", ")}]`,
    );
  const [lo, hi] = tf.tidy(() => [tf.min(x).dataSync()[0], tf.max(x).dataSync()[0]]);
  if (!Number.isFinite(lo) || !Number.isFinite(hi) || lo < clip[0] || hi > clip[1])
    throw new RangeError(
      `${who}: inputs must lie in the valid range [${clip[0]}, ${clip[1]}], found values in [${lo}, ${hi}]`,
    );
}

/**
 * Labels as an int32 tensor [b] (a new tensor: the caller disposes it).
 *
 * @throws RangeError when there are not b labels or one is not an integer in 0..classes-1.
 */
export function labelTensor(labels: Labels, b: number, classes: number, who: string): tf.Tensor1D {
  const values = labels instanceof tf.Tensor ? labels.dataSync() : labels;
  if (values.length !== b)
    throw new RangeError(`${who}: expected ${b} labels, got ${values.length}`);
  const out = new Int32Array(b);
  for (let i = 0; i < b; i++) {
    const v = Number(values[i]);
    if (!Number.isInteger(v) || v < 0 || v >= classes)
      throw new RangeError(
        `${who}: label ${i} is ${values[i]}, expected an integer in 0..${classes - 1}`,
      );
    out[i] = v;
  }
  return tf.tensor1d(out, "int32");
}

/** The model's logits in inference mode (no dropout, no training-only behaviour). */
export function inferenceLogits(model: TransformerClassifier): LogitsFn {
  return (x) => model.forward(x, { training: false }).logits;
}

/**
 * Summed cross-entropy of logits against labels: sum_i (logsumexp(z_i) - z_i[y_i]), the
 * shared {@link crossEntropy} (log-softmax and a selection, so a -inf logit is no NaN:
 * [[-inf, 0, 0]] with label 1 gives ln 2).
 *
 * @param logits float32 [b, C]; @param labels int32 [b] in 0..C-1.
 * @returns a scalar (nats, summed over the batch so each example's gradient is its own).
 * @throws TypeError/RangeError naming crossEntropySum on malformed logits or labels.
 * @example crossEntropySum(tf.tensor2d([[-Infinity, 0, 0]]), tf.tensor1d([1], "int32")) // 0.6931
 */
export function crossEntropySum(logits: tf.Tensor, labels: tf.Tensor): tf.Scalar {
  return crossEntropy(logits, labels, "sum", "crossEntropySum");
}

/**
 * The gradient of the summed cross-entropy on the true labels with respect to the inputs,
 * model in inference mode: row i is d CE(f(x_i), y_i) / d x_i (independent of the batch).
 *
 * A logit of -inf (a class the model rules out) is allowed: the gradient stays finite (d CE / d z
 * = softmax - onehot, 0 at that class). Each call reads the logits [b, C] back once and refuses
 * a row that defines no class distribution ({@link checkLogitRows}), so an attack never steps
 * along a NaN gradient.
 *
 * @param labels int32 [b] (kept: the returned function uses it on each call).
 * @returns x -> float32 gradient with x's shape (a new tensor per call).
 * @throws InputError (from the returned function) on a row of logits with a NaN or +inf entry,
 *   or with every entry -inf.
 */
export function crossEntropyGradient(logitsFn: LogitsFn, labels: tf.Tensor): GradientFn {
  return (x) => {
    let logits: tf.Tensor | null = null;
    const g = tf.grad((z: tf.Tensor) => {
      const l = logitsFn(z);
      logits = tf.keep(l);
      return crossEntropySum(l, labels);
    })(x);
    const kept = logits as unknown as tf.Tensor;
    try {
      checkLogitRows(kept.dataSync(), kept.shape[1] as number);
    } catch (e) {
      g.dispose();
      throw e;
    } finally {
      kept.dispose();
    }
    return g;
  };
}

/**
 * Receives, once per attack call, one flag per example of the batch [b]: 1 where the loss
 * gradient with respect to the input was exactly zero (every entry) where the attack looked:
 * at the clean input (FGSM) or at one or more of the PGD iterates.
 */
export type ZeroGradientFn = (zero: Uint8Array) => void;

/**
 * Which examples of a batch have an all-zero gradient.
 *
 * @param grad float32 [b, ...], the loss gradient of b examples.
 * @returns Uint8Array [b]: 1 where every entry of the example's gradient is exactly 0 (a NaN
 *   entry is not zero); one small read-back.
 * @example zeroGradientRows(tf.tensor2d([[0, 0], [0, 1e-30]])) // Uint8Array [1, 0]
 */
export function zeroGradientRows(grad: tf.Tensor): Uint8Array {
  const b = grad.shape[0] as number;
  const flags = tf.tidy(() => tf.equal(tf.max(tf.abs(tf.reshape(grad, [b, -1])), 1), 0));
  const out = Uint8Array.from(flags.dataSync());
  flags.dispose();
  return out;
}

/**
 * Which examples of a batch have a gradient entry that is NaN or infinite (a model whose
 * backward pass divides by zero, e.g. sqrt at 0, or overflows), in one small read-back.
 *
 * @param grad float32 [b, ...].
 * @returns Uint8Array [b]: 1 where some entry of the example's gradient is not finite.
 * @example nonFiniteGradientRows(tf.tensor2d([[0, NaN], [1, 2]])) // Uint8Array [1, 0]
 */
export function nonFiniteGradientRows(grad: tf.Tensor): Uint8Array {
  const b = grad.shape[0] as number;
  const flags = tf.tidy(() => tf.any(tf.logicalNot(tf.isFinite(tf.reshape(grad, [b, -1]))), 1));
  const out = Uint8Array.from(flags.dataSync());
  flags.dispose();
  return out;
}

/**
 * The gradient with its NaN and infinite entries set to 0 (a new tensor), so that an attack
 * steps along the finite entries instead of writing NaN into its iterate (l_2) or silently
 * not moving (l_inf: sign(NaN) = 0). Call only where {@link nonFiniteGradientRows} flagged a
 * row, and report it ({@link reportNonFiniteGradient}).
 *
 * @example finiteGradient(tf.tensor1d([1, NaN, -Infinity])) // [1, 0, 0]
 */
export function finiteGradient(grad: tf.Tensor): tf.Tensor {
  return tf.tidy(() => tf.where(tf.isFinite(grad), grad, tf.zerosLike(grad)));
}

/**
 * The loss gradient's row checks of one evaluation: OR-s the zero rows and the non-finite rows
 * into `zero` and `nonFinite` [b] (only where `only` is 1, when given: e.g. the rows the model
 * still classifies correctly there, as a gradient at an input already broken does not matter),
 * and returns the gradient to step along (the same tensor when every entry is finite, else a
 * new one with the non-finite entries zeroed, the old one disposed).
 *
 * @example g = checkGradient(g, zero, nonFinite); // then step along g
 */
export function checkGradient(
  grad: tf.Tensor,
  zero: Uint8Array,
  nonFinite: Uint8Array,
  only?: ArrayLike<number>,
): tf.Tensor {
  const counts = (i: number) => only === undefined || only[i] !== 0;
  zeroGradientRows(grad).forEach((z, i) => {
    if (counts(i)) zero[i] |= z;
  });
  const bad = nonFiniteGradientRows(grad);
  if (!bad.some((v) => v !== 0)) return grad;
  bad.forEach((v, i) => {
    if (counts(i)) nonFinite[i] |= v;
  });
  const fixed = finiteGradient(grad);
  grad.dispose();
  return fixed;
}

/**
 * The report of non-finite gradients an attack makes at the end of a call, beside
 * {@link reportZeroGradient}: warns once when any flag is set and hands the flags to
 * `onNonFiniteGradient`. A gradient that is NaN or infinite gives no usable direction, so the
 * robust accuracy of those inputs may reflect gradient masking.
 *
 * @param nonFinite flags [b] (OR-ed over the attack's evaluations).
 */
export function reportNonFiniteGradient(
  nonFinite: Uint8Array,
  who: string,
  norm: AttackNorm,
  options: { onWarning?: (message: string) => void; onNonFiniteGradient?: ZeroGradientFn },
): void {
  const count = nonFinite.reduce((a, z) => a + z, 0);
  if (count > 0)
    (options.onWarning ?? ((m: string) => console.warn(m)))(
      `${who}: the loss gradient holds NaN or infinite entries for ${count} example(s) of ${nonFinite.length} (${norm}); ` +
        "the attack stepped along the finite entries only, so their robust accuracy may be a sign of gradient masking",
    );
  options.onNonFiniteGradient?.(nonFinite);
}

/**
 * The cross-entropy of the true class less its value at equal logits, CE - ln C, in float64
 * from one row of logits z: CE - ln C = log(sum_j exp(z_j - z_y) / C)
 * = log1p(sum_{j != y} expm1(z_j - z_y) / C). This is the quantity APGD compares (see
 * APGD_ATTACK (apgd.ts)): the same objective as the cross-entropy shifted by a constant, but
 * computed from the logit differences, so it keeps their relative precision where the
 * cross-entropy itself sits near ln C and float32 cannot tell two values apart (logits scaled
 * by 1e-10: CE = ln 10 + O(1e-10), while float32's resolution at ln 10 is 2.4e-7). Where a
 * difference exceeds about 709 (expm1 overflows) the logsumexp form is used instead. A logit
 * of -inf (a masked class) adds expm1(-inf) = -1; a true class at -inf gives +inf.
 *
 * @param logits row-major [rows, classes] values (a valid row: see checkLogitRows).
 * @param classes C >= 1; @param row the row; @param label the true class y in 0..C-1.
 * @returns CE - ln C (nats, in [-ln C, +inf]).
 * @example crossEntropyExcess([1e-10, 0, 0], 3, 0, 0) // -6.667e-11 (float32 CE: ln 3 exactly)
 */
export function crossEntropyExcess(
  logits: ArrayLike<number>,
  classes: number,
  row: number,
  label: number,
): number {
  const o = row * classes;
  const zy = logits[o + label];
  if (zy === -Infinity) return Infinity;
  let t = 0;
  for (let j = 0; j < classes; j++) if (j !== label) t += Math.expm1(logits[o + j] - zy);
  if (Number.isFinite(t)) return Math.log1p(t / classes);
  let m = -Infinity;
  for (let j = 0; j < classes; j++) m = Math.max(m, logits[o + j]);
  let s = 0;
  for (let j = 0; j < classes; j++) s += Math.exp(logits[o + j] - m);
  return m + Math.log(s) - zy - Math.log(classes);
}

/**
 * Predicted classes, margins and cross-entropies of a batch: margin_i = z_{y_i} - max_{j != y_i}
 * z_j, in float64 from the float32 logits (negative: misclassified; the DLR losses and Square's
 * fall with it), and the cross-entropy as CE - ln C ({@link crossEntropyExcess}, float64; what
 * the cross-entropy attacks raise). A masked class (-inf) is never the maximum of a valid row;
 * a row whose other classes are all masked has margin +inf (no attack can change its class), a
 * true class at -inf has -inf.
 *
 * @param logitsFn inputs -> logits [b, C]; @param x the inputs; @param labels [b].
 * @returns predicted Int32Array [b], margins and losses Float64Array [b], the class count C.
 * @throws InputError on logits that define no class distribution ({@link checkLogitRows}).
 * @example predictWithMargins(batch.logits, adv, labels).margins[0] // e.g. -0.31 (broken)
 */
export function predictWithMargins(
  logitsFn: LogitsFn,
  x: tf.Tensor,
  labels: ArrayLike<number>,
): { predicted: Int32Array; margins: Float64Array; losses: Float64Array; classes: number } {
  const [logits, classes] = tf.tidy(() => {
    const z = logitsFn(x);
    return [z, tf.argMax(z, 1)];
  });
  const values = logits.dataSync();
  const c = logits.shape[1] as number;
  const predicted = Int32Array.from(classes.dataSync());
  tf.dispose([logits, classes]);
  checkLogitRows(values, c);
  const margins = Float64Array.from(predicted, (_, i) => marginOf(values, c, i, labels[i]));
  const losses = Float64Array.from(predicted, (_, i) =>
    crossEntropyExcess(values, c, i, labels[i]),
  );
  return { predicted, margins, losses, classes: c };
}

/**
 * One row's margin z_y - max_{j != y} z_j in float64 (see {@link predictWithMargins}).
 *
 * @example marginOf([2, 0.5, -Infinity], 3, 0, 0) // 1.5
 */
export function marginOf(
  logits: ArrayLike<number>,
  classes: number,
  row: number,
  label: number,
): number {
  const o = row * classes;
  let other = -Infinity;
  for (let j = 0; j < classes; j++) if (j !== label) other = Math.max(other, logits[o + j]);
  const zy = logits[o + label];
  if (other === -Infinity) return zy === -Infinity ? -Infinity : Infinity;
  return zy - other;
}

/**
 * The zero-gradient report every attack makes at the end of a call, whatever its norm: an
 * exactly zero input gradient leaves the attack without a direction (sign(0) = 0 in l_inf, no
 * normalised step in l_2), so an input that stays correct there is a sign of gradient masking
 * (e.g. a saturated softmax), not of robustness. Warns once when any flag is set, and hands
 * the flags to `onZeroGradient`.
 *
 * @param zero flags [b] from {@link zeroGradientRows} (OR-ed over steps for PGD).
 * @param where "at the clean input" / "at one or more of its K steps", for the message.
 */
export function reportZeroGradient(
  zero: Uint8Array,
  who: string,
  norm: AttackNorm,
  where: string,
  options: { onWarning?: (message: string) => void; onZeroGradient?: ZeroGradientFn },
): void {
  const count = zero.reduce((a, z) => a + z, 0);
  if (count > 0)
    (options.onWarning ?? ((m: string) => console.warn(m)))(
      `${who}: the loss gradient is exactly zero for ${count} example(s) of ${zero.length} (${norm}, ${where}); ` +
        "the attack cannot move them there, so their robust accuracy is a sign of gradient masking, not of robustness",
    );
  options.onZeroGradient?.(zero);
}

/**
 * Why one row of logits defines no class distribution, or null when it does. -Infinity is a
 * valid logit (a class the model rules out: probability 0, as {@link crossEntropy} takes it),
 * so a row is refused only when an entry is NaN or +Infinity (softmax is then NaN), or when
 * every entry is -Infinity (no class is left).
 *
 * @param logits row-major values [rows, classes] (e.g. a float32 tensor's dataSync()).
 * @param classes C >= 1; @param row the row to check.
 * @returns "holds NaN", "holds +Infinity", "is -Infinity for every class", or null.
 * @example logitRowProblem([-Infinity, 0, 2], 3, 0) // null
 * @example logitRowProblem([-Infinity, -Infinity], 2, 0) // "is -Infinity for every class"
 */
export function logitRowProblem(
  logits: ArrayLike<number>,
  classes: number,
  row: number,
): string | null {
  let live = false;
  for (let k = row * classes; k < (row + 1) * classes; k++) {
    const v = logits[k];
    if (Number.isNaN(v)) return "holds NaN";
    if (v === Infinity) return "holds +Infinity";
    if (v !== -Infinity) live = true;
  }
  return live ? null : "is -Infinity for every class";
}

/**
 * Checks every row of logits [rows, classes] with {@link logitRowProblem}: -Infinity is allowed
 * (a masked class), NaN, +Infinity and an all -Infinity row are not.
 *
 * @param logits row-major values; @param classes C >= 1; @param rows rows to check [all].
 * @throws InputError naming the first bad row, counted from 1, e.g. "model: its logits are not
 *   a class distribution: input 3 of 4 holds NaN; ...".
 * @example checkLogitRows([0, -Infinity, 1, 2], 2) // passes: row 0 rules class 1 out
 */
export function checkLogitRows(
  logits: ArrayLike<number>,
  classes: number,
  rows = Math.floor(logits.length / Math.max(1, classes)),
): void {
  for (let i = 0; i < rows; i++) {
    const problem = logitRowProblem(logits, classes, i);
    if (problem !== null)
      throw new InputError(
        // Inputs counted from 1, as analyze counts them.
        `model: its logits are not a class distribution: input ${i + 1} of ${rows} ${problem}; ` +
          (problem === "is -Infinity for every class"
            ? "the model rules out every class for it, so none can be predicted " +
              "(-Infinity alone is allowed for some classes, not for all)"
            : "the weights are broken or overflow (a diverged training run?), or the inputs hold NaN " +
              "(-Infinity alone is allowed: a class the model rules out)"),
      );
  }
}

/**
 * Predicted classes (argmax of the logits, inference mode). A logit of -Infinity is allowed: that
 * class (ruled out by the model) is never predicted, since a valid row has a larger entry.
 *
 * @param x inputs [b, ...] as the model takes them.
 * @returns Int32Array [b].
 * @throws InputError when a row of logits has a NaN or +Infinity entry or is -Infinity for
 *   every class ({@link checkLogitRows}): a broken or diverged model gets no accuracy.
 * @example predictClasses(inferenceLogits(model), images) // Int32Array [b]
 */
export function predictClasses(logitsFn: LogitsFn, x: tf.Tensor): Int32Array {
  const [logits, classes] = tf.tidy(() => {
    const z = logitsFn(x);
    return [z, tf.argMax(z, 1)];
  });
  const values = logits.dataSync();
  const c = logits.shape[1] as number;
  const out = Int32Array.from(classes.dataSync());
  tf.dispose([logits, classes]);
  // argMax of NaN logits is a silent class 0: a broken model must not get an accuracy.
  checkLogitRows(values, c);
  return out;
}
