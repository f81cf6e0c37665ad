import { tf } from "../backend.ts";
import { ATTACK_DEFAULTS } from "./defaults.ts";
import { APGD_OPTIONS, apgdRuns, type AttackLoss } from "./apgd.ts";
import { DLR_EPSILON, largestLogits, sortedRow } from "./apgdDlr.ts";
import {
  checkLogitRows,
  predictWithMargins,
  reportNonFiniteGradient,
  reportZeroGradient,
} from "./loss.ts";
import type { AttackContext, AttackSpec, ClassCheck } from "./registry.ts";
import { replaceRows } from "./steps.ts";

/**
 * The targeted DLR loss of one row in float64: -(z_y - z_t) / (z_pi1 - (z_pi3 + z_pi4) / 2 +
 * 1e-12), z_pi1 >= z_pi2 >= ... the sorted logits, t the target class. With fewer than 4
 * classes above -inf the missing z_pi4 is left out of the mean (z_pi1 - z_pi3), and with fewer
 * than 3 the denominator is 1.
 *
 * @example targetedDlrValue([3, 1, 0, -1], 4, 0, 0, 1) // -(3 - 1) / (3 - (0 - 1) / 2) = -0.571
 */
export function targetedDlrValue(
  logits: ArrayLike<number>,
  classes: number,
  row: number,
  label: number,
  target: number,
): number {
  const [z1, , z3, z4] = sortedRow(logits, classes, row, 4);
  const o = row * classes;
  const reference = [z3, z4].filter(Number.isFinite);
  const denominator =
    reference.length === 0
      ? 1
      : z1 - reference.reduce((a, v) => a + v, 0) / reference.length + DLR_EPSILON;
  return -(logits[o + label] - logits[o + target]) / denominator;
}

/**
 * The targeted DLR loss towards one target class per row, as APGD ascends it: the float32 sum
 * (its gradient) and {@link targetedDlrValue} in float64 (the comparisons).
 *
 * @param targets the target class of each row [b] (not the true class).
 * @example apgdRuns(context, targetedDlrLoss(Int32Array.of(3, 7)))
 */
export function targetedDlrLoss(targets: Int32Array): AttackLoss {
  return {
    name: "targeted DLR",
    sum: (logits, labels) =>
      tf.tidy(() => {
        const classes = logits.shape[1] as number;
        const pickOf = (classOf: tf.Tensor) => {
          const at = tf.cast(tf.oneHot(classOf, classes), "bool");
          return tf.sum(tf.where(at, logits, tf.zerosLike(logits)), 1, true);
        };
        const zy = pickOf(labels);
        const zt = pickOf(tf.tensor1d(targets, "int32"));
        const [z1, , z3, z4] = largestLogits(logits, 4);
        // The mean of z_pi3 and z_pi4 over those above -inf (z_pi4 <= z_pi3); 1 where neither
        // is. The conditions come from isFinite, whose gradient tfjs defines (as 0).
        const f3 = tf.isFinite(z3);
        const reference = tf.where(tf.isFinite(z4), tf.div(tf.add(z3, z4), 2), z3);
        const scale = tf.where(f3, tf.add(tf.sub(z1, reference), DLR_EPSILON), tf.onesLike(z1));
        return tf.sum(tf.div(tf.neg(tf.sub(zy, zt)), scale)) as tf.Scalar;
      }),
    value: (logits, classes, row, label) =>
      targetedDlrValue(logits, classes, row, label, targets[row]),
  };
}

/**
 * APGD-T's class check: with 2 classes the one target is the other class, where the targeted
 * DLR loss has no scale and the attack would repeat APGD-CE; fewer other classes than targets
 * asked reduce the targets (and with 3 classes the scale is z_pi1 - z_pi3).
 *
 * @example targetedClassCheck(5, 9) // { note: "apgd-t: 4 target classes ..." }
 */
export function targetedClassCheck(classes: number, targets: number): ClassCheck {
  if (classes < 3)
    return {
      error:
        `apgd-t: with ${classes} classes the only target is the other class, where the targeted DLR loss has no scale ` +
        "(it needs 4 classes) and the attack would repeat APGD-CE; use apgd (APGD on the cross-entropy) instead",
    };
  const parts: string[] = [];
  if (targets > classes - 1)
    parts.push(
      `${classes - 1} target classes (every class but the true one; the model has ${classes}), not ${targets}`,
    );
  if (classes === 3)
    parts.push("its loss's scale is z_pi1 - z_pi3 (no 4th class for (z_pi3 + z_pi4) / 2)");
  return parts.length === 0 ? null : { note: `apgd-t: ${parts.join("; ")}` };
}

/**
 * APGD-T in any input space (the registered attack's run): for the k = min(targets, C - 1)
 * classes ranked 2nd to (k+1)th by the clean logits of each input, one after another, the APGD
 * loop (settings.restarts runs each, seeds derived from settings.seed and the target's rank)
 * on the targeted DLR loss, on the inputs the model classifies correctly and no earlier target
 * broke (as AutoAttack does). A target class masked at -inf is skipped for that input.
 * Returns per input the iterate that broke it, else the point of lowest margin z_y -
 * max_{j != y} z_j over the targets' results (the input itself when none lowered it).
 *
 * @returns adversarial inputs, float32, batch.x's shape (caller disposes).
 * @throws InputError on logits that define no class distribution (as APGD-CE).
 * @example apgdTargetedIn({ batch: imageBatch(model, x, [0, 1]), kind: "image", labels: y, settings: resolveAttackOptions({ eps: 0.1, targets: 3 }, "me"), who: "apgd-t" })
 */
export function apgdTargetedIn(context: AttackContext): tf.Tensor {
  const { batch, labels, settings } = context;
  const b = batch.size;
  const truth = labels.dataSync();
  const clean = tf.tidy(() => batch.logits(batch.x));
  const values = clean.dataSync();
  const classes = clean.shape[1] as number;
  clean.dispose();
  checkLogitRows(values, classes);
  // Classes of each row by clean logit, largest first.
  const ranked = Array.from({ length: b }, (_, i) =>
    Array.from({ length: classes }, (_, j) => j).sort(
      (p, q) => values[i * classes + q] - values[i * classes + p] || p - q,
    ),
  );
  const k = Math.min(settings.targets, classes - 1);
  const zero = new Uint8Array(b);
  const nonFinite = new Uint8Array(b);
  const broken = Uint8Array.from(ranked, (r, i) => (r[0] === truth[i] ? 0 : 1));
  const margins = predictWithMargins(batch.logits, batch.x, truth).margins;
  let result = tf.clone(batch.x);
  try {
    for (let r = 1; r <= k; r++) {
      const rows: number[] = [];
      for (let i = 0; i < b; i++)
        if (!broken[i] && values[i * classes + ranked[i][r]] !== -Infinity) rows.push(i);
      if (rows.length === 0) continue;
      const targets = Int32Array.from(rows, (i) => ranked[i][r]);
      const sub = rows.length === b ? batch : batch.select(rows);
      const subLabels = tf.tensor1d(
        Int32Array.from(rows, (i) => truth[i]),
        "int32",
      );
      try {
        const adv = apgdRuns(
          {
            ...context,
            batch: sub,
            labels: subLabels,
            settings: { ...settings, seed: (settings.seed + Math.imul(r, 0x85ebca6b)) >>> 0 },
            onWarning: () => {},
            onZeroGradient: (z) => z.forEach((v, j) => (zero[rows[j]] |= v)),
            onNonFiniteGradient: (z) => z.forEach((v, j) => (nonFinite[rows[j]] |= v)),
          },
          targetedDlrLoss(targets),
        );
        try {
          const after = predictWithMargins(sub.logits, adv, subLabels.dataSync());
          const take = rows.map((i, j) => {
            if (after.predicted[j] !== truth[i]) return (broken[i] = 1);
            if (after.margins[j] < margins[i]) return ((margins[i] = after.margins[j]), 1);
            return 0;
          });
          const next = replaceRows(result, adv, rows, take);
          result.dispose();
          result = next;
        } finally {
          adv.dispose();
        }
      } finally {
        subLabels.dispose();
        if (sub !== batch) sub.dispose();
      }
    }
    const where = `at one or more iterates of its runs on ${k} target class(es)`;
    reportZeroGradient(zero, context.who, settings.norm, where, context);
    reportNonFiniteGradient(nonFinite, context.who, settings.norm, context);
  } catch (e) {
    result.dispose();
    throw e;
  }
  return result;
}

/**
 * APGD-T: Auto-PGD on the targeted DLR loss, over the top-k classes.
 *
 * Paper: Croce and Hein 2020, "Reliable evaluation of adversarial robustness with an ensemble
 * of diverse parameter-free attacks", ICML (section 4: the targeted DLR loss
 * -(z_y - z_t) / (z_pi1 - (z_pi3 + z_pi4) / 2 + 1e-12), z sorted z_pi1 >= z_pi2 >= ...; the
 * targets are the classes ranked 2nd to (k+1)th at the clean input, run one after another on
 * the inputs still unbroken, as AutoAttack's APGDAttack_targeted). Norm: l_inf or l_2, as
 * APGD-CE (apgd.ts), with the same step size rule, momentum and float64 loss comparisons.
 * Arguments: eps (radius, >= 0, input units), norm ["linf"], steps [100, as in the paper],
 * targets [9, AutoAttack's standard version] (k; min(k, C - 1) are used), restarts [1] (runs
 * per target), randomStart [true], seed [0]. stepSize is not read. Cost: up to k times
 * APGD-CE's.
 * Classes: at least 3; with 3 the denominator is z_pi1 - z_pi3 (no 4th class), said as a
 * note; with 2 the attack refuses, naming apgd (its one target would be the other class, where
 * it repeats APGD-CE). A class masked at -inf is never a target; rows with fewer than 4 (3)
 * classes above -inf drop z_pi4 (use denominator 1).
 * Input range: images in the clip range ([0, 1]); token embeddings unbounded, padding rows
 * never moved.
 * Shapes: x float32 [b, ...] (images [b, H, W, C] or [b, H*W*C]; embeddings [b, n, d]),
 * labels [b]; returns x's shape.
 */
export const APGD_T_ATTACK: AttackSpec = {
  name: "apgd-t",
  label: "APGD-T",
  summary:
    "Auto-PGD on the targeted DLR loss towards each of the top-k other classes in turn (Croce and Hein 2020)",
  options: {
    ...APGD_OPTIONS,
    restarts: {
      default: ATTACK_DEFAULTS.restarts,
      help: "runs from new random starts, per target class",
    },
    targets: {
      default: ATTACK_DEFAULTS.targets,
      help: "target classes, the top-k after the true one",
    },
  },
  checkClasses: targetedClassCheck,
  run: apgdTargetedIn,
};
