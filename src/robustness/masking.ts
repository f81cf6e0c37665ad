import type { AttackOutcome, RobustnessAtEps, RobustnessEvaluation } from "./tally.ts";
import { attackLabel, attackSpec, attackNames, usesGradient } from "./attacks.ts";

/**
 * The gradient-masking checks of an evaluation (Carlini et al. 2019, "On evaluating
 * adversarial robustness"; Croce and Hein 2020's AutoAttack flags): signs that the gradient
 * attacks' robust accuracy measures a blind gradient rather than robustness. A regulariser that
 * flattens the softmax (as JaSMin flattens attention rows) is the kind that can cause it.
 * Each check sets a flag (attack.json's `masking`), a line in the CLI output and a warning in
 * the report.
 */

/** One check: whether it fired (null: it could not run here) and one line saying what was seen. */
export interface MaskingCheck {
  flag: boolean | null;
  line: string;
}

/** The four checks, and the lines of those that fired. */
export interface MaskingReport {
  /** Inputs broken by a gradient-free attack (Square) but by none of the gradient attacks. */
  gradientFreeOnly: MaskingCheck;
  /** Robust accuracy under the gradient attacks that stays above 0 at the radius of the whole input range. */
  rangeNotBroken: MaskingCheck;
  /** Loss gradients that were exactly zero or held NaN or infinite entries. */
  gradientUnusable: MaskingCheck;
  /** Inputs a gradient attack left unbroken without raising their loss. */
  lossNotRaised: MaskingCheck;
  /** The lines of the checks that fired, in the order above. */
  warnings: string[];
}

/** Whether a registered attack is an ensemble (has members). */
function isEnsemble(name: string): boolean {
  return attackNames().includes(name) && attackSpec(name).members !== undefined;
}

/**
 * Per input at one radius: broken by a gradient attack, and broken by a gradient-free one
 * (individual attacks by their success, ensembles by the member that broke the input).
 */
function brokenKinds(
  r: RobustnessAtEps,
  n: number,
): { gradient: Uint8Array; free: Uint8Array; kinds: Set<string> } {
  const gradient = new Uint8Array(n);
  const free = new Uint8Array(n);
  const kinds = new Set<string>();
  for (const [name, o] of Object.entries(r.attacks) as [string, AttackOutcome][]) {
    if (o.brokenBy !== undefined && isEnsemble(name)) {
      // Its members on a model with many classes: every member it can run.
      for (const m of attackSpec(name).members!(Number.MAX_SAFE_INTEGER))
        kinds.add(usesGradient(m) ? "gradient" : "free");
      o.brokenBy.forEach((m, i) => {
        if (m === null) return;
        if (usesGradient(m)) gradient[i] = 1;
        else free[i] = 1;
      });
      continue;
    }
    kinds.add(usesGradient(name) ? "gradient" : "free");
    const into = usesGradient(name) ? gradient : free;
    o.success.forEach((s, i) => (into[i] |= s));
  }
  return { gradient, free, kinds };
}

/** "a, b and c". */
const andList = (items: string[]) =>
  items.length <= 1 ? items.join("") : `${items.slice(0, -1).join(", ")} and ${items.at(-1)}`;

const percent = (v: number) => `${(100 * v).toFixed(1)}%`;

/** eps as the lines write it: at most 6 significant digits. */
const formatEps = (eps: number) => String(Number(eps.toPrecision(6)));

/**
 * Check 1 of {@link maskingChecks}: inputs broken by a gradient-free attack but by none of the
 * gradient attacks at the same radius (run where both kinds ran).
 */
function gradientFreeOnlyCheck(rows: RobustnessAtEps[], n: number): MaskingCheck {
  const perEps = rows.map((r) => {
    const { gradient, free, kinds } = brokenKinds(r, n);
    let count = 0;
    for (let i = 0; i < n; i++) if (free[i] && !gradient[i]) count++;
    return { eps: r.eps, count, both: kinds.has("gradient") && kinds.has("free") };
  });
  if (!perEps.some((p) => p.both))
    return {
      flag: null,
      line: "not run (it compares a gradient-free attack, e.g. square or autoattack, with gradient attacks: run both kinds)",
    };
  const seen = perEps.filter((p) => p.both && p.count > 0);
  return seen.length === 0
    ? {
        flag: false,
        line: "the gradient-free attack broke no input that the gradient attacks left robust",
      }
    : {
        flag: true,
        line:
          `the gradient-free attack (Square) broke inputs that every gradient attack left robust (${seen
            .map((p) => `eps ${formatEps(p.eps)}: ${p.count} of ${n}`)
            .join("; ")}): ` + "the gradient attacks are blind there, a sign of gradient masking",
      };
}

/**
 * Check 2 of {@link maskingChecks}: at the range check's radius the gradient attacks (every
 * attack, when none reads the gradient) leave some clean-correct input correct.
 */
function rangeCheck(evaluation: RobustnessEvaluation, rangeWhat?: string): MaskingCheck {
  const n = evaluation.count;
  const range = evaluation.range;
  if (range === undefined)
    return {
      flag: null,
      line: "not run (no range check: it attacks at the radius of the whole input range)",
    };
  const { gradient, free, kinds } = brokenKinds(range, n);
  const useGradient = kinds.has("gradient");
  let left = 0;
  for (let i = 0; i < n; i++)
    if (evaluation.cleanCorrect[i] && !gradient[i] && (useGradient || !free[i])) left++;
  const by = useGradient ? "the gradient attacks" : "the attacks";
  const what = `eps ${formatEps(range.eps)}${rangeWhat !== undefined ? ` (${rangeWhat})` : ""}`;
  return left === 0
    ? { flag: false, line: `${by} broke every input at ${what}` }
    : {
        flag: true,
        line:
          `${by} left ${left} of ${n} inputs (${percent(left / n)}) correct at ${what}, where an attack with a usable ` +
          "gradient breaks every input: robust accuracy does not fall towards 0 as the radius grows to the input range, " +
          "a sign of gradient masking (or of a model that predicts one class almost everywhere)",
      };
}

/**
 * Per gradient attack and radius, how many inputs it left robust (clean-correct, not broken)
 * carry the flag `pick` reads, as "LABEL at eps E: K of N" (none: no entry). A zero gradient at
 * an input already broken (e.g. the DLR loss where the true class is third) does not matter.
 */
function flaggedRobust(
  evaluation: RobustnessEvaluation,
  rows: RobustnessAtEps[],
  gradientNames: string[],
  label: (name: string) => string,
  pick: (o: AttackOutcome) => Uint8Array,
): string[] {
  const n = evaluation.count;
  return rows.flatMap((r) =>
    gradientNames.flatMap((a) => {
      const o = r.attacks[a];
      if (o === undefined) return [];
      const flags = pick(o);
      let count = 0;
      for (let i = 0; i < n; i++)
        if (flags[i] && evaluation.cleanCorrect[i] && !o.success[i]) count++;
      return count === 0 ? [] : [`${label(a)} at eps ${formatEps(r.eps)}: ${count} of ${n}`];
    }),
  );
}

/** Check 3 of {@link maskingChecks} from the inputs with a zero and with a non-finite gradient. */
function gradientUnusableCheck(noGradient: boolean, zero: string[], bad: string[]): MaskingCheck {
  return noGradient
    ? { flag: null, line: "not run (no gradient attack ran)" }
    : zero.length === 0 && bad.length === 0
      ? {
          flag: false,
          line: "the loss gradient was finite and non-zero at every input the gradient attacks left robust",
        }
      : {
          flag: true,
          line: `the loss gradient was ${andList([
            ...(zero.length > 0
              ? [`exactly zero at inputs the attack left robust (${zero.join("; ")})`]
              : []),
            ...(bad.length > 0
              ? [`NaN or infinite at inputs the attack left robust (${bad.join("; ")})`]
              : []),
          ])}: the attack had no usable direction there, so their robust accuracy is a sign of gradient masking, not of robustness`,
        };
}

/** Check 4 of {@link maskingChecks} from the inputs whose loss did not rise. */
function lossNotRaisedCheck(noGradient: boolean, flat: string[]): MaskingCheck {
  return noGradient
    ? { flag: null, line: "not run (no gradient attack ran)" }
    : flat.length === 0
      ? { flag: false, line: "every gradient attack raised the loss of each input it left robust" }
      : {
          flag: true,
          line:
            `the loss did not rise along the attack for inputs it left robust (${flat.join("; ")}): ` +
            "neither did the cross-entropy rise nor the margin fall, a sign of gradient masking",
        };
}

/**
 * The masking checks of an evaluation:
 *
 * 1. gradientFreeOnly: an input broken by a gradient-free attack (Square, alone or as
 *    AutoAttack's member) but by none of the gradient attacks at the same radius (runs when
 *    both kinds ran; AutoAttack's own check_square_sr).
 * 2. rangeNotBroken: at the range check's radius (the whole input range, evaluation.range) the
 *    gradient attacks (every attack, when none reads the gradient) leave some input correct,
 *    where an attack with a usable gradient breaks every input: robust accuracy that does not
 *    fall towards 0 as the radius grows (or a model that predicts one class almost everywhere).
 *    Runs when the range check ran.
 * 3. gradientUnusable: an input whose loss gradient was exactly zero, or held NaN or infinite
 *    entries, where a gradient attack looked (at any radius of the results).
 * 4. lossNotRaised: an input a gradient attack left correct without raising its cross-entropy
 *    or lowering its margin: the loss did not rise along the attack.
 *
 * @param label an attack's name in the lines [the registry's label].
 * @param rangeWhat what the range check's radius is, in words (e.g. "the width 1 of the input
 *   range [0, 1]"), for its line.
 * @returns the four checks (flag null where one could not run) and the lines of those that fired.
 * @example maskingChecks(evaluation).warnings // [] when nothing points to masking
 */
export function maskingChecks(
  evaluation: RobustnessEvaluation,
  options: { label?: (name: string) => string; rangeWhat?: string } = {},
): MaskingReport {
  const label = options.label ?? attackLabel;
  const rows = evaluation.results.filter((r) => r.eps > 0);
  const names = [...new Set(rows.flatMap((r) => Object.keys(r.attacks)))];
  const gradientNames = names.filter(usesGradient);
  const noGradient = gradientNames.length === 0;
  // 3 and 4: the gradient attacks' flags on the inputs they left robust.
  const flagged = (pick: (o: AttackOutcome) => Uint8Array) =>
    flaggedRobust(evaluation, rows, gradientNames, label, pick);
  const gradientFreeOnly = gradientFreeOnlyCheck(rows, evaluation.count);
  const rangeNotBroken = rangeCheck(evaluation, options.rangeWhat);
  const gradientUnusable = gradientUnusableCheck(
    noGradient,
    flagged((o) => o.zeroGradient),
    flagged((o) => o.nonFiniteGradient),
  );
  const lossNotRaised = lossNotRaisedCheck(
    noGradient,
    flagged((o) => o.lossNotRaised),
  );
  const checks = [gradientFreeOnly, rangeNotBroken, gradientUnusable, lossNotRaised];
  return {
    gradientFreeOnly,
    rangeNotBroken,
    gradientUnusable,
    lossNotRaised,
    warnings: checks.filter((c) => c.flag === true).map((c) => c.line),
  };
}
