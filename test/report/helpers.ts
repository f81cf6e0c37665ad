import { fileURLToPath } from "node:url";

/** The hand-made run folders under test/report/fixtures. */
export const FIXTURES = {
  baseline: fileURLToPath(new URL("./fixtures/baseline", import.meta.url)),
  jasmin: fileURLToPath(new URL("./fixtures/jasmin", import.meta.url)),
  minimal: fileURLToPath(new URL("./fixtures/minimal", import.meta.url)),
};

/** One chart of a report: its id (data-chart) and its inline SVG. */
export interface ChartHtml {
  id: string;
  svg: string;
}

/** The charts of a report: every <figure class="chart">, with the SVG inside it. */
export function chartsOf(html: string): ChartHtml[] {
  const charts: ChartHtml[] = [];
  const re = /<figure class="chart"[^>]*data-chart="([^"]+)"[^>]*>([\s\S]*?)<\/figure>/g;
  for (const m of html.matchAll(re)) {
    const svg = /<svg[\s\S]*<\/svg>/.exec(m[2]);
    charts.push({ id: m[1], svg: svg === null ? "" : svg[0] });
  }
  return charts;
}

/**
 * Drawn marks of a vega SVG: the items (path, rect, circle, line) inside the groups of data
 * marks (class "mark-... role-mark"), not axes or legends.
 */
export function markCount(svg: string): number {
  let count = 0;
  const re =
    /<g class="mark-(?:symbol|rect|line|area|rule|arc|trail) role-mark[^"]*"[^>]*>([\s\S]*?)<\/g>/g;
  for (const m of svg.matchAll(re))
    count += (m[1].match(/<(path|rect|circle|line)\b/g) ?? []).length;
  return count;
}
