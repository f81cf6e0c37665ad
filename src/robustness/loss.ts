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
