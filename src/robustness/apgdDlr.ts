import { tf } from "../backend.ts";
import { APGD_OPTIONS, apgdRuns, type AttackLoss } from "./apgd.ts";
import type { AttackContext, AttackSpec, ClassCheck } from "./registry.ts";

/**
 * The difference-of-logits-ratio losses of Croce and Hein 2020 (section 4), untargeted here
 * and targeted in apgdTargeted.ts, and APGD-DLR, APGD on the untargeted one.
 */

/** The 1e-12 the paper adds to the DLR losses' denominators. */
export const DLR_EPSILON = 1e-12;

/**
 * The k largest logits of each row, each [b, 1], largest first (tf.topk has no gradient in
 * tfjs: the maximum is taken k times, the entry found masked to -inf each time). A row with
 * fewer than k classes above -inf gives -inf for the missing ones. Call inside tf.tidy.
 *
 * @example largestLogits(tf.tensor2d([[1, 3, 2]]), 2) // [[3]], [[2]]
 */
export function largestLogits(logits: tf.Tensor, k: number): tf.Tensor[] {
  const classes = logits.shape[1] as number;
  const out: tf.Tensor[] = [];
  let rest = logits;
  for (let j = 0; j < k; j++) {
    out.push(tf.max(rest, 1, true));
    if (j + 1 < k) {
      const found = tf.cast(tf.oneHot(tf.argMax(rest, 1), classes), "bool");
      rest = tf.where(found, tf.fill(rest.shape, -Infinity), rest);
    }
  }
  return out;
}

/**
 * A denominator that is `scale` where it is finite, and 1 where it is not (a row whose
 * reference logits are masked at -inf: its DLR loss is then the plain logit difference).
 * Call inside tf.tidy.
 */
export function finiteScale(scale: tf.Tensor): tf.Tensor {
  return tf.where(tf.isFinite(scale), tf.add(scale, DLR_EPSILON), tf.onesLike(scale));
}

/** The k largest values of one row, in float64, largest first (-inf for missing ones). */
export function sortedRow(
  logits: ArrayLike<number>,
  classes: number,
  row: number,
  k: number,
): number[] {
  const values = Array.from({ length: classes }, (_, j) => logits[row * classes + j]);
  values.sort((a, b) => b - a);
  return Array.from({ length: k }, (_, j) => values[j] ?? -Infinity);
}

/**
 * The untargeted DLR loss of one row in float64: -(z_y - max_{i != y} z_i) / (z_pi1 - z_pi3
 * + 1e-12), z_pi1 >= z_pi2 >= ... the sorted logits (invariant to shifting and scaling the
 * logits). Where z_pi3 is -inf (fewer than 3 classes above -inf in the row) the denominator is 1.
 *
 * @param logits row-major [rows, C]; @param label the true class.
 * @example dlrValue([3, 1, 0], 3, 0, 0) // -(3 - 1) / (3 - 0) = -0.667
 */
export function dlrValue(
  logits: ArrayLike<number>,
  classes: number,
  row: number,
  label: number,
): number {
  const [z1, , z3] = sortedRow(logits, classes, row, 3);
  const o = row * classes;
  let other = -Infinity;
  for (let j = 0; j < classes; j++) if (j !== label) other = Math.max(other, logits[o + j]);
  const scale = z1 - z3;
  const denominator = Number.isFinite(scale) ? scale + DLR_EPSILON : 1;
  return -(logits[o + label] - other) / denominator;
}

/**
 * The untargeted DLR loss as APGD ascends it: the float32 batch sum (its gradient) and
 * {@link dlrValue} in float64 (the comparisons).
 */
export const DLR_LOSS: AttackLoss = {
  name: "DLR",
  sum: (logits, labels) =>
    tf.tidy(() => {
      const classes = logits.shape[1] as number;
      const truth = tf.cast(tf.oneHot(labels, classes), "bool");
      const zy = tf.sum(tf.where(truth, logits, tf.zerosLike(logits)), 1, true);
      const other = tf.max(tf.where(truth, tf.fill(logits.shape, -Infinity), logits), 1, true);
      const [z1, , z3] = largestLogits(logits, 3);
      return tf.sum(tf.div(tf.neg(tf.sub(zy, other)), finiteScale(tf.sub(z1, z3)))) as tf.Scalar;
    }),
  value: dlrValue,
};

/** APGD-DLR's class check: the DLR loss needs a third class for its scale z_pi1 - z_pi3. */
export function dlrClassCheck(classes: number): ClassCheck {
  return classes < 3
    ? {
        error: `apgd-dlr: the DLR loss divides by z_pi1 - z_pi3 and needs at least 3 classes, the model has ${classes}; use apgd (APGD on the cross-entropy) instead`,
      }
    : null;
}

/**
 * APGD-DLR in any input space (the registered attack's run): the APGD loop and restarts of
 * apgd.ts on the untargeted DLR loss.
 *
 * @returns adversarial inputs, float32, batch.x's shape (caller disposes).
 * @throws InputError on logits that define no class distribution (as APGD-CE).
 * @example apgdDlrIn({ batch: imageBatch(model, x, [0, 1]), kind: "image", labels: y, settings: resolveAttackOptions({ eps: 0.1, steps: 100 }, "me"), who: "apgd-dlr" })
 */
export function apgdDlrIn(context: AttackContext): tf.Tensor {
  return apgdRuns(context, DLR_LOSS);
}

/**
 * APGD-DLR: Auto-PGD on the difference-of-logits-ratio loss, untargeted.
 *
 * Paper: Croce and Hein 2020, "Reliable evaluation of adversarial robustness with an ensemble
 * of diverse parameter-free attacks", ICML (Algorithm 1 with the DLR loss of section 4,
 * DLR(x, y) = -(z_y - max_{i != y} z_i) / (z_pi1 - z_pi3 + 1e-12), z sorted z_pi1 >= z_pi2 >=
 * ...). The loss is invariant to shifting and rescaling the logits, so a model that inflates
 * its logits (or squashes them: JaSMin-flattened attention) cannot hide behind the
 * cross-entropy's saturation. Norm: l_inf or l_2, as APGD-CE (apgd.ts), with the same step
 * size rule, momentum, best-iterate choice and float64 loss comparisons.
 * Arguments: eps (radius, >= 0, input units), norm ["linf"], steps [100, as in the paper],
 * randomStart [true], restarts [1], seed [0]. stepSize is not read.
 * Classes: at least 3 (the scale needs z_pi3): with 2 the attack refuses, naming apgd
 * (AutoAttack only warns). A class masked at -inf is allowed; a row with fewer than 3 classes
 * above -inf uses the plain logit difference (denominator 1).
 * Input range: images in the clip range ([0, 1]); token embeddings unbounded, padding rows
 * never moved.
 * Shapes: x float32 [b, ...] (images [b, H, W, C] or [b, H*W*C]; embeddings [b, n, d]),
 * labels [b]; returns x's shape.
 */
export const APGD_DLR_ATTACK: AttackSpec = {
  name: "apgd-dlr",
  label: "APGD-DLR",
  summary:
    "Auto-PGD on the scale-free DLR loss (Croce and Hein 2020), untargeted; needs 3 or more classes",
  options: APGD_OPTIONS,
  checkClasses: (classes) => dlrClassCheck(classes),
  run: apgdDlrIn,
};
