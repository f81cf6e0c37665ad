import { formatNumber } from "../util/format.ts";
import type { LayerBounds } from "./compute.ts";

/**
 * The explorer's bounds table (its page, src/explorer/page.ts): one row per block and the
 * network, the true value and each bound variant with its bound/true, the variants in the order
 * the worker gives them (the registry's, src/lipschitz/variants/), so that a variant registered
 * where the analysis runs gets its column with no list kept here. Plain HTML from plain data:
 * no DOM, also run in Node by the tests.
 *
 * @param r the layers of an inspection (compute.ts inspect), at least one.
 * @returns a `<table class="bounds">`: cells carry data-variant and data-bound.
 * @example boundsTable(inspect(model, pixels)) // "<table class=\"bounds\"><tr><th>layer</th>..."
 */
export function boundsTable(r: { layers: readonly LayerBounds[] }): string {
  const variants = Object.keys(r.layers[0].bounds);
  const head = `<tr><th>layer</th><th>true value</th>${variants.map((v) => `<th>${v}</th>`).join("")}</tr>`;
  const rows = r.layers.map(
    (l) =>
      `<tr data-layer="${l.name}" data-true="${l.true}"><th>${l.name}</th><td>${formatNumber(l.true, 4)}</td>${variants
        .map((v) => {
          const b = l.bounds[v]!;
          return `<td data-variant="${v}" data-bound="${b}">${formatNumber(b, 4)}<br><small>${formatNumber(b / l.true, 3)}x</small></td>`;
        })
        .join("")}</tr>`,
  );
  return `<table class="bounds">${head}${rows.join("")}</table>`;
}
