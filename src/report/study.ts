import type { TopLevelSpec } from "vega-lite";
import { METRIC_NOTES, type StudyGroup, type StudySummary } from "../study/aggregate.ts";
import { formatDifference, formatInterval, metricsWithValue, tableVariants, unfinishedNote, variantsNote } from "../study/table.ts";
import { escapeHtml, figure, page, section, table, warning } from "./html.ts";
import { renderVegaLite } from "./render.ts";

/**
 * The report of a study folder (`attnlip report STUDY_DIR`): per group of runs (same data,
 * model and JaSMin settings), a table of every headline metric per lambda (mean ± 95%
 * Student-t half-width over seeds) with the paired difference against lambda 0, charts of
 * lambda against each metric with error bars, and clean against robust accuracy (one point per
 * lambda, error bars both ways).
 */

/** One metric the report draws against lambda. */
interface Drawn {
  name: string;
  title: string;
  percent: boolean;
}

/** Headline metrics of a group in drawing order: accuracies, robust accuracies, Lipschitz figures, attention. */
function drawnMetrics(group: StudyGroup): Drawn[] {
  // Metrics without a value at any lambda (bounds for another kind of attention) are left out.
  const names = metricsWithValue(group);
  const robust = [...names].filter((n) => n.startsWith("robust:"));
  const ratios = [...names].filter((n) => n.startsWith("networkRatio:"));
  const blocks = [...names].filter((n) => n.startsWith("blockTrue:"));
  const list: Drawn[] = [
    { name: "cleanAccuracy", title: "clean accuracy (whole test split)", percent: true },
    ...robust.map((n) => ({ name: n, title: robustTitle(n), percent: true })),
    { name: "networkTrue", title: "median true network Lipschitz constant", percent: false },
    { name: "compositionFloor", title: "median composition floor", percent: false },
    ...blocks.map((n) => ({ name: n, title: `median true Lipschitz, block ${n.split(":")[1]}`, percent: false })),
    { name: "meanSigma", title: "mean sigma of attention rows", percent: false },
    { name: "meanTop1", title: "mean p(1) of attention rows", percent: false },
    ...ratios.map((n) => ({ name: n, title: `median network bound/true, ${n.split(":")[1]}`, percent: false })),
  ];
  return list.filter((m) => names.has(m.name));
}

/** "APGD l_inf eps 0.01 robust accuracy" from "robust:linf:apgd:eps=0.01". */
function robustTitle(name: string): string {
  const [, norm, attack, eps] = name.split(":");
  return `${attack.toUpperCase()} ${norm === "linf" ? "l_inf" : "l_2"} ${eps.replace("=", " ")} robust accuracy`;
}

/** Chart data: one row per (metric, lambda) with mean and the interval's ends (the mean when there is none). */
function metricRows(group: StudyGroup, metrics: Drawn[]) {
  return metrics.flatMap((m) =>
    group.lambdas.flatMap((l) => {
      const s = l.metrics[m.name];
      if (s === null || s === undefined) return [];
      return [{ metric: m.title, lambda: String(l.lambda), mean: s.mean, low: s.low ?? s.mean, high: s.high ?? s.mean, n: s.n }];
    }),
  );
}

/** A panel title in lines of at most about 30 characters (long titles would widen the columns past 800 px). */
function wrapTitle(title: string, width = 30): string[] {
  const lines: string[] = [];
  for (const word of title.split(" ")) {
    const last = lines.at(-1);
    if (last !== undefined && last.length + 1 + word.length <= width) lines[lines.length - 1] = `${last} ${word}`;
    else lines.push(word);
  }
  return lines;
}


/**
 * Small multiples: lambda (ordinal, in the grid's order) against each metric, the mean as a
 * point and the 95% interval as a bar; each panel has its own title, axes and y scale.
 *
 * @example lambdaSpec(group, drawnMetrics(group))
 */
export function lambdaSpec(group: StudyGroup, metrics: Drawn[]): TopLevelSpec {
  const lambdas = group.lambdas.map((l) => String(l.lambda));
  const rows = metricRows(group, metrics);
  const x = { field: "lambda", type: "ordinal", sort: lambdas, title: "JaSMin lambda", axis: { labelAngle: 0 } };
  // The network bound variants drawn against lambda: those the printed table shows (the report's table lists every variant).
  const drawnVariants = new Set(tableVariants());
  const drawn = metrics.filter((m) => !m.name.startsWith("networkRatio:") || drawnVariants.has(m.name.split(":")[1]));
  return {
    // Two columns: the page fits 800 px.
    columns: 2,
    concat: drawn.map((m) => {
      const y = { type: "quantitative", title: null, scale: { zero: false }, axis: m.percent ? { format: ".1%" } : { format: ".3~s" } };
      return {
        title: { text: wrapTitle(m.title), fontSize: 12 },
        data: { values: rows.filter((r) => r.metric === m.title) },
        width: 200,
        height: 140,
        layer: [
          { mark: { type: "rule", strokeWidth: 1.5, color: "#4c78a8" }, encoding: { x, y: { ...y, field: "low" }, y2: { field: "high" } } },
          { mark: { type: "point", filled: true, size: 40, color: "#4c78a8" }, encoding: { x, y: { ...y, field: "mean" } } },
        ],
      };
    }),
  } as unknown as TopLevelSpec;
}

/**
 * Clean against robust accuracy, one point per lambda and robust metric (panel), with 95%
 * intervals both ways.
 */
export function cleanRobustSpec(group: StudyGroup, robust: Drawn[]): TopLevelSpec {
  const rows = robust.flatMap((m) =>
    group.lambdas.flatMap((l) => {
      const c = l.metrics.cleanAccuracy;
      const r = l.metrics[m.name];
      if (!c || !r) return [];
      return [{ metric: m.title, lambda: String(l.lambda), clean: c.mean, cleanLow: c.low ?? c.mean, cleanHigh: c.high ?? c.mean, robust: r.mean, robustLow: r.low ?? r.mean, robustHigh: r.high ?? r.mean }];
    }),
  );
  const lambdas = group.lambdas.map((l) => String(l.lambda));
  // The legend below the panels: two panels and a legend at the side would not fit 800 px.
  const colour = { field: "lambda", type: "ordinal", sort: lambdas, title: "JaSMin lambda", scale: { scheme: "viridis" }, legend: { orient: "bottom" } };
  const x = { field: "clean", type: "quantitative", title: "clean accuracy", axis: { format: ".1%" }, scale: { zero: false } };
  const y = { field: "robust", type: "quantitative", title: "robust accuracy", axis: { format: ".1%" }, scale: { zero: false } };
  return {
    columns: 2,
    concat: robust.map((m) => ({
      title: { text: m.title, fontSize: 12 },
      data: { values: rows.filter((r) => r.metric === m.title) },
      width: 220,
      height: 180,
      layer: [
        { mark: { type: "rule" }, encoding: { x: { ...x, field: "cleanLow" }, x2: { field: "cleanHigh" }, y, color: colour } },
        { mark: { type: "rule" }, encoding: { x, y: { ...y, field: "robustLow" }, y2: { field: "robustHigh" }, color: colour } },
        { mark: { type: "point", filled: true, size: 60 }, encoding: { x, y, color: colour } },
      ],
    })),
  } as unknown as TopLevelSpec;
}

/** The group's table: metrics as rows, one column per lambda, one per paired difference. */
function groupTable(group: StudyGroup, metrics: Drawn[]): string {
  const diffs = group.lambdas.filter((l) => l.difference !== undefined);
  const header = ["metric", ...group.lambdas.map((l) => `λ = ${l.lambda}`), ...diffs.map((l) => `Δ λ = ${l.lambda} − 0 [95% CI]`)];
  const rows = metrics.map((m) => [
    m.title,
    ...group.lambdas.map((l) => formatInterval(l.metrics[m.name], m.percent)),
    ...diffs.map((l) => formatDifference(l.difference?.[m.name], m.percent)),
  ]);
  return table(header, rows, "Mean ± 95% half-width over seeds (accuracies in %, their intervals in points); Δ: paired difference from λ = 0 with the same seed");
}

const seedsOf = (g: StudyGroup) => [...new Set(g.lambdas.flatMap((l) => l.seeds))].sort((a, b) => a - b);

/**
 * Builds the study report page (self-contained HTML, inline SVG, no scripts).
 *
 * @param summary the study's aggregation (study/aggregate.ts aggregateStudy of the folder).
 * @example const html = await buildStudyReport(await aggregateStudy("study"), { title: "JaSMin on spam" })
 */
export async function buildStudyReport(summary: StudySummary, options: { title?: string; dir?: string } = {}): Promise<string> {
  const title = options.title ?? "attnlip study: JaSMin lambda against accuracy, robustness and Lipschitz constants";
  const parts: string[] = [
    `<h1>${escapeHtml(title)}</h1>`,
    `<p class="runs">${summary.finished} finished run(s)${options.dir !== undefined ? ` in <code>${escapeHtml(options.dir)}</code>` : ""}.</p>`,
    ...(unfinishedNote(summary) !== null ? [warning(unfinishedNote(summary)!.replace(/^note: /, ""))] : []),
    `<div class="howto"><strong>How to read this report.</strong> Each run trains, analyses and attacks one model; runs with the same settings and different seeds are combined: the mean over seeds with a 95% confidence interval from Student's t distribution (bars). A paired difference compares each lambda with lambda 0 <em>for the same seed</em>; its interval excluding 0 is what "lower" or "higher" means in the tables, and "no clear change" means the study cannot tell the difference from seed-to-seed noise. Robust accuracies are under APGD (or the attacks named) on the first test inputs of each run's held-out split; the true network constant is the exact spectral norm of the input Jacobian (median over the analysed inputs).</div>`,
  ];
  if (summary.groups.length === 0) parts.push(`<p class="na">Not available: no finished runs yet.</p>`);
  for (const [i, g] of summary.groups.entries()) {
    const metrics = drawnMetrics(g);
    const absent = variantsNote(g);
    const robust = metrics.filter((m) => m.name.startsWith("robust:"));
    const id = `group-${i}`;
    const body = [
      `<p>${escapeHtml(`${g.data}, ${g.model}, JaSMin ${g.jasminNorm} / ${g.reduce}; seeds ${seedsOf(g).join(", ")}; lambdas ${g.lambdas.map((l) => l.lambda).join(", ")}`)}</p>`,
      g.verdict.length > 0 ? `<p><strong>Verdict on the paper's claims</strong> (paired differences from λ = 0; "holds" means the 95% interval excludes 0 in the claimed direction):</p><ul>${g.verdict.map((v) => `<li>${escapeHtml(v)}</li>`).join("")}</ul>` : "",
      g.lambdas.some((l) => l.lambda === 0) ? "" : warning("this group has no lambda 0, so there are no paired differences and no verdict"),
      groupTable(g, metrics),
      absent !== null ? `<p class="na">${escapeHtml(absent)}.</p>` : "",
      figure(`${id}-lambda`, await renderVegaLite(lambdaSpec(g, metrics), `${id}-lambda`), "Each metric against the JaSMin weight lambda: mean over seeds (point) and 95% Student-t interval (bar). Each panel has its own scale."),
      robust.length > 0
        ? figure(`${id}-clean-robust`, await renderVegaLite(cleanRobustSpec(g, robust), `${id}-clean-robust`), "Clean against robust accuracy, one point per lambda (colour), with 95% intervals both ways: up and to the right is better.")
        : "",
    ];
    parts.push(section(id, `${g.data} / ${g.model}`, body.join("\n")));
  }
  parts.push(
    section(
      "metrics",
      "What the metrics are",
      table(["metric", "meaning"], Object.entries(METRIC_NOTES).map(([k, v]) => [k, v])),
    ),
  );
  parts.push(`<footer>Made by attnlip report from the study's finished runs. Charts: Vega-Lite, rendered to SVG without a browser. This file needs no network.</footer>`);
  return page(title, parts.join("\n"));
}
