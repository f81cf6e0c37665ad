import { tf } from "../backend.ts";
import { ATTACK_DEFAULTS } from "./defaults.ts";
import { APGD_ATTACK, APGD_OPTIONS } from "./apgd.ts";
import { APGD_T_ATTACK } from "./apgdTargeted.ts";
import { attackWho } from "./inputSpace.ts";
import { predictWithMargins } from "./loss.ts";
import type { AttackContext, AttackSpec, ClassCheck } from "./registry.ts";
import { SQUARE_ATTACK } from "./square.ts";
import { replaceRows } from "./steps.ts";

/** AutoAttack's members here, in the order they run (FAB-T, the optional fourth, is not implemented). */
const MEMBERS: readonly AttackSpec[] = [APGD_ATTACK, APGD_T_ATTACK, SQUARE_ATTACK];

/**
 * The members AutoAttack runs on a model with `classes` classes, in order: APGD-CE, APGD-T,
 * Square; with 2 classes APGD-T is left out (its one target is the other class, where it
 * would repeat APGD-CE).
 *
 * @example autoAttackMembers(10) // ["apgd", "apgd-t", "square"]
 * @example autoAttackMembers(2) // ["apgd", "square"]
 */
export function autoAttackMembers(classes: number): string[] {
  return MEMBERS.filter((m) => classes > 2 || m !== APGD_T_ATTACK).map((m) => m.name);
}

/** The ensemble's class check: a note when APGD-T is left out (its own note covers 3 classes and fewer targets). */
export function autoAttackClassCheck(classes: number): ClassCheck {
  return classes <= 2
    ? {
        note: `autoattack: with ${classes} classes APGD-T is left out (its one target would be the other class, where it repeats APGD-CE): APGD-CE, then Square`,
      }
    : null;
}

/**
 * AutoAttack in any input space (the registered attack's run): its members one after another,
 * each on the inputs the model classifies correctly and no earlier member broke (AutoAttack's
 * run_standard_evaluation), each with its own seed derived from settings.seed; the first
 * (APGD-CE) runs on the whole batch with settings.seed itself, so that it is the same run as
 * APGD-CE alone and the ensemble breaks every input that one breaks. An input counts
 * as broken when any member breaks it (the worst case per input); context.onBrokenBy gets the
 * member that broke each input first. Returns per input the point that broke it, else the
 * point of lowest margin z_y - max_{j != y} z_j among the gradient members' results (the
 * input itself when none lowered it). Zero and non-finite gradient flags are the OR of the
 * members'; the members' warnings go to context.onWarning.
 *
 * @returns adversarial inputs, float32, batch.x's shape (caller disposes).
 * @throws InputError on logits that define no class distribution.
 * @example autoAttackIn({ batch: imageBatch(model, x, [0, 1]), kind: "image", labels: y, settings: resolveAttackOptions({ eps: 8 / 255, steps: 100 }, "me"), who: "autoattack" })
 */
export function autoAttackIn(context: AttackContext): tf.Tensor {
  const { batch, labels, settings } = context;
  const b = batch.size;
  const truth = labels.dataSync();
  const clean = predictWithMargins(batch.logits, batch.x, truth);
  const members = autoAttackMembers(clean.classes).map((name) =>
    MEMBERS.find((m) => m.name === name)!,
  );
  const brokenBy: (string | null)[] = new Array<string | null>(b).fill(null);
  const broken = Uint8Array.from(clean.predicted, (p, i) => (p === truth[i] ? 0 : 1));
  const margins = Float64Array.from(clean.margins);
  const zero = new Uint8Array(b);
  const nonFinite = new Uint8Array(b);
  let result = tf.clone(batch.x);
  try {
    members.forEach((member, m) => {
      // The first member attacks the whole batch with the batch's own seed: the very run it
      // makes alone, so the ensemble never breaks fewer inputs than APGD-CE alone. The others
      // attack the inputs still robust, each with a seed of its own.
      const rows: number[] = [];
      for (let i = 0; i < b; i++) if (m === 0 || !broken[i]) rows.push(i);
      if (rows.length === 0) return;
      const wasBroken = Uint8Array.from(broken);
      const sub = rows.length === b ? batch : batch.select(rows);
      const subTruth = Int32Array.from(rows, (i) => truth[i]);
      const subLabels = tf.tensor1d(subTruth, "int32");
      try {
        const adv = member.run({
          batch: sub,
          kind: context.kind,
          labels: subLabels,
          settings: {
            ...settings,
            seed: m === 0 ? settings.seed : (settings.seed ^ Math.imul(m, 0xc2b2ae35)) >>> 0,
          },
          who: attackWho(member.name, context.kind),
          onWarning: context.onWarning,
          onZeroGradient: (z) => z.forEach((v, j) => (zero[rows[j]] |= v)),
          onNonFiniteGradient: (z) => z.forEach((v, j) => (nonFinite[rows[j]] |= v)),
        });
        try {
          const after = predictWithMargins(sub.logits, adv, subTruth);
          const take = rows.map((i, j) => {
            if (wasBroken[i]) return 0; // misclassified unattacked: left as it is
            if (after.predicted[j] !== truth[i]) {
              broken[i] = 1;
              brokenBy[i] = member.name;
              return 1;
            }
            if (member.gradientFree !== true && after.margins[j] < margins[i]) {
              margins[i] = after.margins[j];
              return 1;
            }
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
    });
  } catch (e) {
    result.dispose();
    throw e;
  }
  context.onZeroGradient?.(zero);
  context.onNonFiniteGradient?.(nonFinite);
  context.onBrokenBy?.(brokenBy);
  return result;
}

/**
 * AutoAttack: the ensemble APGD-CE, APGD-T, Square, run in that order on the inputs still
 * robust, an input counted as broken when any member breaks it (the worst case per input).
 *
 * Paper: Croce and Hein 2020, "Reliable evaluation of adversarial robustness with an ensemble
 * of diverse parameter-free attacks", ICML (its standard version: APGD-CE, APGD-T, FAB-T,
 * Square; FAB-T is left out here, as optional), and RobustBench's protocol (Croce et al. 2021).
 * Square is the gradient-free member: an input it breaks after the gradient members failed is
 * a sign of gradient masking (masking.ts). Norm: l_inf or l_2, every member in the same ball.
 * Arguments: eps (radius, >= 0, input units), norm ["linf"], steps [100: APGD-CE's and
 * APGD-T's], restarts [1: APGD-CE's, and APGD-T's per target], targets [9: APGD-T's],
 * queries [5000: Square's] (AutoAttack's standard values; --steps, --targets and --queries cut
 * them for time), randomStart [true], seed [0] (each member derives its own). stepSize is
 * not read.
 * Classes: with 2, APGD-T is left out (a note says so); with 3, APGD-T runs with 2 targets
 * and its 3-class scale (its note).
 * Reported: the ensemble's robust accuracy, and per input the member that broke it
 * (AttackOutcome.brokenBy), from which attack.json gets the robust accuracy after each member.
 * The ensemble never breaks fewer inputs than APGD-CE alone with the same settings (the same
 * run); APGD-T and Square run here on the inputs still robust with seeds of their own, so run
 * alone on every input they may break a few inputs the ensemble's runs do not, and the other
 * way round.
 * Input range: images in the clip range ([0, 1]); token embeddings unbounded, padding rows
 * never moved.
 * Shapes: x float32 [b, ...] (images [b, H, W, C] or [b, H*W*C]; embeddings [b, n, d]),
 * labels [b]; returns x's shape.
 */
export const AUTOATTACK: AttackSpec = {
  name: "autoattack",
  label: "AutoAttack",
  summary:
    "the ensemble APGD-CE, APGD-T, Square in that order on the inputs still robust, the worst case per input (Croce and Hein 2020)",
  options: {
    ...APGD_OPTIONS,
    restarts: {
      default: ATTACK_DEFAULTS.restarts,
      help: "APGD-CE's runs, and APGD-T's per target class",
    },
    targets: { default: ATTACK_DEFAULTS.targets, help: "APGD-T's target classes" },
    queries: { default: ATTACK_DEFAULTS.queries, help: "Square's query budget per input" },
  },
  members: autoAttackMembers,
  checkClasses: autoAttackClassCheck,
  run: autoAttackIn,
};
