import type { StudyGroup } from "./group.ts";
import type { MeanInterval } from "./statistics.ts";

/**
 * The seed paper's claims (arXiv:2507.07814) checked on a study group: JaSMin lowers the true
 * local Lipschitz constant of the network, and it raises robust accuracy; each as a paired
 * difference against lambda 0 (same seed) with its 95% interval. The wording is fixed here so
 * that the printed table, the report and the demo say the same thing.
 */

/** What a paired difference says: its 95% interval is above 0, below 0, holds 0, or is unknown (one seed). */
export type Direction = "higher" | "lower" | "no clear change" | "one seed";

/**
 * The direction of a paired difference.
 *
 * @example direction({ n: 3, mean: -2, sd: 1, halfWidth: 2.5, low: -4.5, high: 0.5 }) // "no clear change"
 */
export function direction(d: MeanInterval | null | undefined): Direction | null {
  if (d === null || d === undefined) return null;
  if (d.low === null || d.high === null) return "one seed";
  return d.low > 0 ? "higher" : d.high < 0 ? "lower" : "no clear change";
}

/** One claim at one lambda: the metric's paired difference and what it says. */
export interface ClaimCheck {
  claim: "lipschitz" | "robustness";
  lambda: number;
  metric: string;
  difference: MeanInterval;
  direction: Direction;
  /** Whether the paper's claim holds at this lambda: the difference goes its way with an interval excluding 0. */
  holds: boolean | null;
}

/**
 * Every check of the paper's two training claims in a group: per nonzero lambda, the true
 * network Lipschitz constant (claim: lower) and each robust accuracy (claim: higher).
 * `holds` is true when the difference goes the claimed way and its interval excludes 0, false
 * when it goes the other way with an interval excluding 0, null when the study cannot tell.
 *
 * @example claimChecks(summary.groups[0]).filter((c) => c.claim === "lipschitz")
 */
export function claimChecks(group: StudyGroup): ClaimCheck[] {
  const checks: ClaimCheck[] = [];
  for (const l of group.lambdas) {
    if (l.difference === undefined) continue;
    for (const [metric, d] of Object.entries(l.difference)) {
      const claim = metric === "networkTrue" ? "lipschitz" : metric.startsWith("robust:") ? "robustness" : null;
      if (claim === null || d === null) continue;
      const dir = direction(d)!;
      const claimed = claim === "lipschitz" ? "lower" : "higher";
      const holds = dir === claimed ? true : dir === "higher" || dir === "lower" ? false : null;
      checks.push({ claim, lambda: l.lambda, metric, difference: d, direction: dir, holds });
    }
  }
  return checks;
}

/**
 * One sentence per claim for a group: at how many of the (lambda, metric) checks the claim
 * holds, fails, or cannot be told from seed-to-seed noise.
 *
 * @example verdictLines(group) // ["JaSMin lowers the true network Lipschitz constant: holds at lambda 1; ...", ...]
 */
export function verdictLines(group: StudyGroup): string[] {
  const checks = claimChecks(group);
  const lines: string[] = [];
  const say = (claim: ClaimCheck["claim"], text: string) => {
    const mine = checks.filter((c) => c.claim === claim);
    if (mine.length === 0) return;
    const label = (c: ClaimCheck) => (claim === "lipschitz" ? `lambda ${c.lambda}` : `lambda ${c.lambda} ${c.metric.replace(/^robust:/, "")}`);
    const holds = mine.filter((c) => c.holds === true).map(label);
    const fails = mine.filter((c) => c.holds === false).map(label);
    // A difference of exactly 0 at every seed (e.g. robust accuracy 0% for every run: the
    // attack breaks every input) carries no information either way: said apart from noise.
    const equal = (c: ClaimCheck) => c.difference.mean === 0 && c.difference.sd === 0;
    const unclear = mine.filter((c) => c.holds === null && !equal(c)).map(label);
    const same = mine.filter((c) => c.holds === null && equal(c)).map(label);
    const parts = [
      holds.length > 0 ? `holds at ${holds.join(", ")}` : null,
      fails.length > 0 ? `the opposite at ${fails.join(", ")}` : null,
      unclear.length > 0 ? `cannot be told from seed-to-seed noise at ${unclear.join(", ")}` : null,
      same.length > 0 ? `no information at ${same.join(", ")} (the same value at every seed with and without JaSMin)` : null,
    ].filter((p) => p !== null);
    lines.push(`${text}: ${parts.join("; ")} (${mine.length} paired comparison(s) with lambda 0, 95% intervals over seeds)`);
  };
  say("lipschitz", "JaSMin lowers the true network Lipschitz constant");
  say("robustness", "JaSMin raises robust accuracy");
  return lines;
}
