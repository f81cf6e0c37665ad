/**
 * HTML building blocks of the report: escaping, number formats, tables, sections and the page
 * shell with its inline stylesheet. Nothing here refers to anything outside the page.
 */

/** Escapes text for HTML element content and attribute values. */
export function escapeHtml(text: string): string {
  return text
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;")
    .replace(/'/g, "&#39;");
}

/** A number for a table: 4 significant digits, exponent form outside [1e-3, 1e5), "—" when missing. */
export function formatNumber(value: number | null | undefined): string {
  if (value === null || value === undefined || Number.isNaN(value)) return "—";
  if (!Number.isFinite(value)) return value > 0 ? "∞" : "−∞";
  if (value === 0) return "0";
  const abs = Math.abs(value);
  if (abs >= 1e5 || abs < 1e-3) {
    const [mantissa, exponent] = value.toExponential(3).split("e");
    return `${mantissa}e${Number(exponent)}`;
  }
  return String(Number(value.toPrecision(4)));
}

/** A fraction as a percentage with one decimal ("—" when missing). */
export function formatPercent(value: number | null | undefined): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return "—";
  return `${(100 * value).toFixed(1)}%`;
}

/** A cell of {@link table}: text (escaped) or trusted HTML; `num` right-aligns it. */
export type Cell = string | { html: string; num?: boolean };

function cellHtml(cell: Cell): string {
  return typeof cell === "string" ? escapeHtml(cell) : cell.html;
}

/** Numbers, percentages and "—" are right-aligned, text left-aligned. */
function isNumeric(cell: Cell): boolean {
  if (typeof cell !== "string") return cell.num === true;
  return /^[-−+]?(\d[\d.,]*(e[-+]?\d+)?%?|∞|—)$/.test(cell.trim());
}

/**
 * A table with a header row; the first column is a row header. Text cells wrap (long paths and
 * descriptions too, anywhere if they must) so that the table fits the page's column; numeric
 * cells do not.
 */
export function table(header: Cell[], rows: Cell[][], caption?: string): string {
  const head = `<tr>${header.map((h) => `<th scope="col">${cellHtml(h)}</th>`).join("")}</tr>`;
  const body = rows
    .map(
      (r) =>
        `<tr>${r.map((c, i) => (i === 0 ? `<th scope="row">${cellHtml(c)}</th>` : `<td${isNumeric(c) ? ' class="num"' : ""}>${cellHtml(c)}</td>`)).join("")}</tr>`,
    )
    .join("\n");
  const cap = caption === undefined ? "" : `<caption>${escapeHtml(caption)}</caption>`;
  return `<div class="table-wrap"><table>${cap}<thead>${head}</thead><tbody>\n${body}\n</tbody></table></div>`;
}

/** A chart: inline SVG in a figure with a caption; `id` names the chart for tests and anchors. */
export function figure(id: string, svg: string, caption: string): string {
  return `<figure class="chart" id="chart-${escapeHtml(id)}" data-chart="${escapeHtml(id)}" role="img" aria-label="${escapeHtml(caption)}">\n${svg}\n<figcaption>${escapeHtml(caption)}</figcaption></figure>`;
}

/** The "not available" note of a section or a run whose data is missing. */
export function notAvailable(what: string): string {
  return `<p class="na">Not available: ${escapeHtml(what)}.</p>`;
}

/** A warning paragraph (a result that should not be trusted as it stands). */
export function warning(text: string): string {
  return `<p class="warn">Warning: ${escapeHtml(text)}</p>`;
}

/** A report section with an anchor. */
export function section(id: string, title: string, body: string): string {
  return `<section id="${escapeHtml(id)}">\n<h2>${escapeHtml(title)}</h2>\n${body}\n</section>`;
}

const STYLE = `
:root { color-scheme: light; }
body { font: 15px/1.5 Helvetica, Arial, sans-serif; color: #222; margin: 0; background: #fafafa; }
main { max-width: 1180px; margin: 0 auto; padding: 24px 32px 64px; background: white; }
h1 { font-size: 26px; margin: 8px 0 4px; }
h2 { font-size: 20px; margin: 36px 0 8px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
h3 { font-size: 16px; margin: 20px 0 6px; }
p.runs { color: #555; margin: 0 0 12px; }
.swatch { display: inline-block; width: 12px; height: 12px; border-radius: 2px; vertical-align: -1px; margin-right: 4px; }
.howto { background: #f3f6fa; border-left: 4px solid #4c78a8; padding: 10px 16px; margin: 16px 0; }
.findings { background: #f2f8f0; border-left-color: #54a24b; }
.howto ul { margin: 4px 0 8px; }
nav ol { columns: 2; margin: 8px 0; }
figure.chart { margin: 12px 0 20px; overflow-x: auto; }
figure.chart svg { display: block; max-width: none; }
figcaption { color: #555; font-size: 13px; margin-top: 4px; max-width: 900px; }
.table-wrap { overflow-x: auto; margin: 8px 0 16px; }
table { border-collapse: collapse; font-size: 13px; font-variant-numeric: tabular-nums; max-width: 100%; }
caption { text-align: left; font-weight: bold; padding: 4px 0; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; overflow-wrap: anywhere; min-width: 4em; }
td.num { text-align: right; white-space: nowrap; }
th { overflow-wrap: break-word; }
th[scope=row], thead th { background: #f5f5f5; text-align: left; }
td small { color: #777; }
p.warn { color: #a94442; background: #f2dede; border: 1px solid #ebccd1; padding: 6px 12px; margin: 6px 0; }
td .warn { color: #a94442; font-weight: bold; }
p.na { color: #8a6d3b; background: #fcf8e3; border: 1px solid #faebcc; padding: 6px 12px; display: inline-block; margin: 6px 0; }
code { background: #f2f2f2; padding: 0 3px; border-radius: 3px; }
footer { color: #888; font-size: 12px; margin-top: 40px; }
`;

/** The whole page: one file with the stylesheet inline and no scripts. */
export function page(title: string, body: string): string {
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="attnlip report">
<title>${escapeHtml(title)}</title>
<style>${STYLE}</style>
</head>
<body>
<main>
${body}
</main>
</body>
</html>
`;
}
