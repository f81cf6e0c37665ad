import { formatNumber, renderTable } from "../util/table.ts";
import type { AttackRecord, EnsembleRecord } from "./attackFile.ts";
import { attackLabel, attackSpec, settingDefault, type AttackSettingName } from "./attacks.ts";
import { maskingChecks, type MaskingReport } from "./masking.ts";
import type { RobustnessAtEps, RobustnessEvaluation } from "./tally.ts";

/**
 * An evaluation as attack.json holds it and as the `attack` command prints it: the rows per
 * radius (robust accuracy and the masking flags per attack, an ensemble's detail), the range
 * check, the masking checks, and the lines of the printout. Kept here, beside the evaluation,
 * so that whichever pipeline runs the attacks writes and prints the same.
 */

/** The settings an attack may read, as the command passes them (steps null: each attack's own). */
export interface GivenSettings {
  steps: number | null;
  stepSize: number | null;
  restarts: number;
  queries: number;
  targets: number;
  seed: number;
  randomStart?: boolean;
}

/**
 * The settings each attack runs with: per attack, only those it reads (its option table),
 * the given value or the attack's own default (steps: PGD 10, the APGD attacks 100).
 *
 * @example attackSettingsOf(["pgd", "square"], { steps: null, stepSize: null, restarts: 1, queries: 500, targets: 9, seed: 0 })
 *   // { pgd: { steps: 10, stepSize: null, randomStart: true, seed: 0 }, square: { queries: 500, seed: 0 } }
 */
export function attackSettingsOf(
  attacks: readonly string[],
  given: GivenSettings,
): Record<string, Record<string, number | boolean | null>> {
  const out: Record<string, Record<string, number | boolean | null>> = {};
  for (const name of attacks) {
    const row: Record<string, number | boolean | null> = {};
    for (const setting of Object.keys(attackSpec(name).options) as AttackSettingName[]) {
      const value = given[setting];
      row[setting] =
        value === undefined || value === null ? (settingDefault(name, setting) ?? null) : value;
    }
    out[name] = row;
  }
  return out;
}

/**
 * The one step count every attack that reads steps ran with, or undefined when they differ
 * (or none reads it).
 *
 * @example uniformSteps({ pgd: { steps: 10 }, apgd: { steps: 100 } }) // undefined
 */
export function uniformSteps(
  settings: Record<string, Record<string, number | boolean | null>>,
): number | undefined {
  const steps = [
    ...new Set(
      Object.values(settings)
        .map((s) => s.steps)
        .filter((v) => typeof v === "number"),
    ),
  ];
  return steps.length === 1 ? (steps[0] as number) : undefined;
}

/** An ensemble's detail at one radius: its members, the robust accuracy after each, the breaker of each input. */
function ensembleOf(
  name: string,
  r: RobustnessAtEps,
  evaluation: RobustnessEvaluation,
  classes: number,
): EnsembleRecord | null {
  const outcome = r.attacks[name];
  const spec = attackSpec(name);
  if (outcome?.brokenBy === undefined || spec.members === undefined) return null;
  const members = spec.members(classes);
  const n = evaluation.count;
  const correct = evaluation.cleanCorrect.reduce((a, c) => a + c, 0);
  const robustAfter: Record<string, number> = {};
  let broken = 0;
  for (const m of members) {
    broken += outcome.brokenBy.filter((b) => b === m).length;
    robustAfter[m] = (correct - broken) / n;
  }
  const brokenBy = outcome.brokenBy.map((b, i) => (evaluation.cleanCorrect[i] ? b : "clean"));
  return { members, robustAfter, brokenBy };
}

/** What attack.json holds of an evaluation (besides the run's settings and the proxy). */
export type AttackResults = Pick<AttackRecord, "results" | "rangeCheck" | "masking">;

/**
 * The rows, range check and masking checks of attack.json from an evaluation.
 *
 * @param attacks the attacks that ran, in order; @param classes the model's class count
 *   (an ensemble's members depend on it).
 * @param rangeWhat what the range check's radius is, in words.
 * @example attackResultsOf(evaluation, ["autoattack"], 10, "the width 1 of the input range [0, 1]").masking.warnings
 */
export function attackResultsOf(
  evaluation: RobustnessEvaluation,
  attacks: readonly string[],
  classes: number,
  rangeWhat?: string,
): AttackResults {
  const per = (r: RobustnessAtEps, pick: (a: string) => number | null | undefined) =>
    Object.fromEntries(
      attacks.map((a) => [a, r.attacks[a] === undefined ? null : (pick(a) ?? null)]),
    );
  const results = evaluation.results.map((r) => {
    const ensembles = Object.fromEntries(
      attacks
        .map((a) => [a, r.eps > 0 ? ensembleOf(a, r, evaluation, classes) : null] as const)
        .filter((e): e is readonly [string, EnsembleRecord] => e[1] !== null),
    );
    return {
      eps: r.eps,
      robust: per(r, (a) => r.attacks[a]?.robustAccuracy),
      zeroGradient: per(r, (a) => r.attacks[a]?.zeroGradientFraction),
      nonFiniteGradient: per(r, (a) => r.attacks[a]?.nonFiniteGradientFraction),
      lossNotRaised: per(r, (a) => r.attacks[a]?.lossNotRaisedFraction),
      ...(Object.keys(ensembles).length > 0 ? { ensembles } : {}),
    };
  });
  const range = evaluation.range;
  const masking: MaskingReport = maskingChecks(evaluation, { rangeWhat });
  return {
    results,
    rangeCheck:
      range === undefined
        ? null
        : {
            eps: range.eps,
            what: rangeWhat ?? "the whole input range",
            robust: per(range, (a) => range.attacks[a]?.robustAccuracy),
          },
    masking,
  };
}

const percent = (v: number | null | undefined) =>
  v === null || v === undefined ? "-" : `${(100 * v).toFixed(2)}%`;

/**
 * The lines the `attack` command prints for its results: the table of robust accuracy per
 * attack and eps (stdout), each ensemble's robust accuracy after each member (stdout), a line
 * with every masking check's state (stdout), and a warning per check that fired (stderr).
 *
 * @example const { out, err } = attackLines(record, ["pgd", "autoattack"], 0.75)
 */
export function attackLines(
  record: AttackResults,
  attacks: readonly string[],
  cleanAccuracy: number,
): { out: string[]; err: string[] } {
  const out: string[] = [];
  const err: string[] = [];
  out.push(
    renderTable(
      ["eps", ...attacks.map((a) => `${attackLabel(a)} robust acc`), "clean acc"],
      record.results.map((r) => [
        formatNumber(r.eps),
        ...attacks.map((a) => percent(r.robust[a])),
        percent(cleanAccuracy),
      ]),
    ),
  );
  for (const r of record.results)
    for (const [name, e] of Object.entries(r.ensembles ?? {})) {
      const counts = e.members.map(
        (m) => `${attackLabel(m)} ${e.brokenBy.filter((b) => b === m).length}`,
      );
      out.push(
        `${attackLabel(name)} at eps ${formatNumber(r.eps)}: robust accuracy after ${e.members
          .map((m) => `${attackLabel(m)} ${percent(e.robustAfter[m])}`)
          .join(", then ")} (inputs broken first by ${counts.join(", ")})`,
      );
    }
  const m = record.masking;
  const state = (flag: boolean | null) => (flag === null ? "not run" : flag ? "FIRED" : "ok");
  const range = record.rangeCheck === null ? "" : ` at eps ${formatNumber(record.rangeCheck.eps)}`;
  out.push(
    `masking checks: broken by Square only ${state(m.gradientFreeOnly.flag)}; range check${range} ${state(m.rangeNotBroken.flag)}; ` +
      `zero or non-finite gradients ${state(m.gradientUnusable.flag)}; loss not raised ${state(m.lossNotRaised.flag)}`,
  );
  for (const w of m.warnings) err.push(`attack: warning: masking check: ${w}`);
  return { out, err };
}
