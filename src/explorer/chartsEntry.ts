import { renderVegaLite } from "../report/render.ts";

// charts.js: Vega-Lite's renderer for the explorer page, a script of its own (bundle.ts). vega and
// vega-lite are most of the page's code; in page.js they would be parsed and compiled before the
// page sends the model and the first input to its worker. The page loads this script when it
// draws its first chart (page.ts, renderVegaLite), while the worker computes.
(self as unknown as { attnlipRenderVegaLite: typeof renderVegaLite }).attnlipRenderVegaLite =
  renderVegaLite;
