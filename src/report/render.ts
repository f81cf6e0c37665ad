import * as vega from "vega";
import { compile, type TopLevelSpec } from "vega-lite";

/**
 * Vega-Lite specifications rendered to SVG in Node: vega-lite compiles the specification to
 * Vega, a headless vega View (renderer "none", no canvas needed: without the optional `canvas`
 * package vega estimates text widths) renders it with toSVG(). The SVG is made ready for
 * inlining into HTML: HTML parses inline <svg> into the SVG namespace by itself, so the
 * namespace declarations (the only URLs vega writes) are dropped.
 */

/** Shared look of every chart: no ARIA descriptions per mark (they would double the size). */
export const CHART_CONFIG = {
  aria: false,
  background: "white",
  font: "Helvetica, Arial, sans-serif",
  view: { stroke: "#ddd" },
  axis: { labelFontSize: 11, titleFontSize: 12, gridColor: "#eee" },
  // Legend labels up to 400 px are never cut to an ellipsis (run names such as "JaSMin (lambda 0.1)").
  legend: { labelFontSize: 11, titleFontSize: 12, labelLimit: 400 },
  header: { labelFontSize: 12, titleFontSize: 12 },
  title: { fontSize: 14, anchor: "start" },
} as const;

/** A loader that refuses every request: report charts carry their data inline. */
const offlineLoader = {
  load: () => Promise.reject(new Error("attnlip report: charts must not load external data")),
  sanitize: () =>
    Promise.reject(new Error("attnlip report: charts must not load external resources")),
  http: () => Promise.reject(new Error("attnlip report: no network")),
  file: () => Promise.reject(new Error("attnlip report: no file access")),
} as unknown as vega.Loader;

function hex(n: string): string {
  return Math.max(0, Math.min(255, Math.round(Number(n))))
    .toString(16)
    .padStart(2, "0");
}

/**
 * Makes vega's SVG ready for inline HTML and smaller: drops the namespace declarations (HTML
 * parses inline <svg> into the SVG namespace by itself; they would be the only URLs in the
 * file), rounds coordinates in path data and transforms to 2 decimals (far below a pixel), and
 * writes rgb(r, g, b) colours as #rrggbb. Heatmaps with thousands of cells shrink by about half.
 * With `idPrefix`, element ids (gradients, clip paths) and their url(#id) references get the
 * prefix, so that several SVGs in one page cannot collide.
 */
export function inlineSvg(svg: string, idPrefix?: string): string {
  const scoped =
    idPrefix === undefined
      ? svg
      : svg
          .replace(/\bid="([^"]+)"/g, `id="${idPrefix}-$1"`)
          .replace(/url\(#([^)]+)\)/g, `url(#${idPrefix}-$1)`);
  return scoped
    .replace(/\s+xmlns(:\w+)?="[^"]*"/g, "")
    .replace(/\s+version="1\.1"/, "")
    .replace(/\s(d|transform)="([^"]*)"/g, (_m, attr: string, value: string) => {
      const rounded = value.replace(/-?\d+\.\d{3,}(e-?\d+)?/g, (x) =>
        String(Number(Number(x).toFixed(2))),
      );
      return ` ${attr}="${rounded}"`;
    })
    .replace(
      /rgb\((\d+(?:\.\d+)?),\s*(\d+(?:\.\d+)?),\s*(\d+(?:\.\d+)?)\)/g,
      (_m, r: string, g: string, b: string) => `#${hex(r)}${hex(g)}${hex(b)}`,
    );
}

/**
 * Compiles a Vega-Lite specification and renders it to an SVG string for inline HTML.
 *
 * @param spec a Vega-Lite specification with inline data (`data.values`).
 * @param idPrefix prefix of the SVG's element ids (give each chart of a page its own).
 * @returns `<svg ...>...</svg>` without namespace attributes.
 */
export async function renderVegaLite(spec: TopLevelSpec, idPrefix?: string): Promise<string> {
  const withConfig = {
    ...spec,
    config: { ...CHART_CONFIG, ...(spec.config ?? {}) },
  } as TopLevelSpec;
  // Errors only: vega-lite's warnings about spec details would be noise on the user's terminal.
  const vgSpec = compile(withConfig, { logger: vega.logger(vega.Error) }).spec;
  const view = new vega.View(vega.parse(vgSpec), {
    renderer: "none",
    loader: offlineLoader,
    logLevel: vega.Error,
  });
  try {
    return inlineSvg(await view.toSVG(), idPrefix);
  } finally {
    view.finalize();
  }
}
