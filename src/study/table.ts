import { boundVariants } from "../lipschitz/variants/index.ts";
import { formatNumber, renderTable } from "../util/table.ts";
import type { StudyGroup, StudySummary } from "./aggregate.ts";
import type { MeanInterval } from "./statistics.ts";
import { direction } from "./verdict.ts";

/**
 * The network bound variants the printed table shows (study.json and study.csv hold all of them):
 * those whose record says `summary` (src/lipschitz/variants/), in the registry's order.
 *
 * @example tableVariants() // ["paper", "t3-half", "t3-exact", "cov", "fused", "l2-dist", "l2-cov", "kim"]
 */
export function tableVariants(): string[] {
  return boundVariants()
    .filter((v) => v.summary === true)
    .map((v) => v.name);
}

/**
 * The metrics of a group with a value at some lambda (a bound variant that does not apply to the
 * group's model, such as the dot-product variants of an L2-attention model, has none).
 */
export function metricsWithValue(group: StudyGroup): Set<string> {
  return new Set(
    group.lambdas.flatMap((l) => Object.entries(l.metrics).filter(([, s]) => s !== null && s !== undefined).map(([n]) => n)),
  );
}

/**
 * A line naming the network bound variants without a value in the group (they bound another
 * kind of attention than the group's model has), or null when every variant has one.
 *
 * @example variantsNote(l2Group) // "no value for paper, t3-one, ...: these bounds do not apply to vit-tiny-l2's attention"
 */
export function variantsNote(group: StudyGroup): string | null {
  const all = new Set(group.lambdas.flatMap((l) => Object.keys(l.metrics)));
  const have = metricsWithValue(group);
  const none = [...all].filter((n) => n.startsWith("networkRatio:") && !have.has(n)).map((n) => n.split(":")[1]);
  return none.length === 0 ? null : `no value for ${none.join(", ")}: these bounds do not apply to ${group.model}'s attention`;
}

/** The metrics the printed table shows, in order: accuracies, robust accuracies, Lipschitz figures, attention. */
function shownMetrics(group: StudyGroup): { name: string; label: string; percent: boolean }[] {
  const names = [...metricsWithValue(group)];
  const robust = names.filter((n) => n.startsWith("robust:"));
  return [
    { name: "cleanAccuracy", label: "clean accuracy (test split)", percent: true },
    ...robust.map((n) => {
      const [, norm, attack, eps] = n.split(":");
      return { name: n, label: `${attack} ${norm} ${eps.replace("=", " ")} robust accuracy`, percent: true };
    }),
    { name: "networkTrue", label: "median network Lipschitz, true", percent: false },
    { name: "compositionFloor", label: "median composition floor", percent: false },
    ...tableVariants().filter((v) => names.includes(`networkRatio:${v}`)).map((v) => ({
      name: `networkRatio:${v}`,
      label: `median network bound/true, ${v}`,
      percent: false,
    })),
    { name: "meanSigma", label: "mean sigma of attention rows", percent: false },
    { name: "meanTop1", label: "mean p_(1) of attention rows", percent: false },
  ].filter((m) => names.includes(m.name));
}

const show = (x: number, percent: boolean) => (percent ? `${(100 * x).toFixed(1)}%` : formatNumber(x, 4));

/** "mean ± half-width" (percent points for accuracies); "mean (1 seed)" without an interval. */
export function formatInterval(s: MeanInterval | null | undefined, percent: boolean): string {
  if (s === null || s === undefined) return "-";
  if (s.halfWidth === null) return `${show(s.mean, percent)} (1 seed)`;
  return `${show(s.mean, percent)} ± ${percent ? `${(100 * s.halfWidth).toFixed(1)}` : formatNumber(s.halfWidth, 2)}`;
}

/**
 * A paired difference as "+1.2 [-0.3, 2.7]" and a verdict: "lower" or "higher" when the 95%
 * interval excludes 0, "no clear change" when it holds 0 (or there is one seed).
 */
export function formatDifference(d: MeanInterval | null | undefined, percent: boolean): string {
  if (d === null || d === undefined) return "-";
  const f = (x: number) => (percent ? `${x >= 0 ? "+" : ""}${(100 * x).toFixed(1)}` : `${x >= 0 ? "+" : ""}${formatNumber(x, 3)}`);
  if (d.low === null || d.high === null) return `${f(d.mean)} (1 seed)`;
  return `${f(d.mean)} [${f(d.low)}, ${f(d.high)}] ${direction(d)}`;
}

/**
 * A line when some runs of the grid are not finished (not started, running or stopped): the
 * statistics cover the finished runs only. Null when every run is finished.
 *
 * @example unfinishedNote({ finished: 3, planned: 6, unfinished: ["a", "b", "c"] } as StudySummary)
 */
export function unfinishedNote(summary: StudySummary): string | null {
  if (summary.unfinished.length === 0) return null;
  const of = summary.planned !== null ? ` of the grid's ${summary.planned}` : "";
  return `note: ${summary.unfinished.length} run(s)${of} are not finished (not started, running or stopped): the statistics cover the ${summary.finished} finished run(s) only`;
}

/**
 * The printed study: per group, one row per shown metric, one column per lambda (mean ± the
 * 95% interval's half-width over seeds) and one per nonzero lambda with the paired difference
 * against lambda 0 (same seed), its interval and verdict.
 *
 * @example console.log(studyTable(await aggregateStudy("study")))
 */
export function studyTable(summary: StudySummary): string {
  const parts: string[] = [];
  const note = unfinishedNote(summary);
  if (summary.groups.length === 0) return ["no finished runs yet", note].filter((s) => s !== null).join("\n");
  if (note !== null) parts.push(note);
  for (const g of summary.groups) {
    const seeds = g.lambdas.map((l) => l.seeds.length);
    const seedText = Math.min(...seeds) === Math.max(...seeds) ? `${seeds[0]} seed(s) per lambda` : `seeds per lambda: ${g.lambdas.map((l) => `${l.lambda}: ${l.seeds.length}`).join(", ")}`;
    const control = g.lambdas.some((l) => l.lambda === 0)
      ? "Δ = paired difference from lambda 0 [95% interval]"
      : "no lambda 0 in this group: no paired differences";
    parts.push(`${g.data}, ${g.model}, JaSMin ${g.jasminNorm}/${g.reduce}: ${seedText}; mean ± 95% half-width (accuracies in %, points); ${control}`);
    const diffs = g.lambdas.filter((l) => l.difference !== undefined);
    const head = ["", ...g.lambdas.map((l) => `lambda ${l.lambda}`), ...diffs.map((l) => `Δ lambda ${l.lambda}`)];
    const rows = shownMetrics(g).map((m) => [
      m.label,
      ...g.lambdas.map((l) => formatInterval(l.metrics[m.name], m.percent)),
      ...diffs.map((l) => formatDifference(l.difference?.[m.name], m.percent)),
    ]);
    parts.push(renderTable(head, rows));
    const absent = variantsNote(g);
    if (absent !== null) parts.push(`note: ${absent}`);
    for (const line of g.verdict) parts.push(`verdict: ${line}`);
  }
  return parts.join("\n");
}
