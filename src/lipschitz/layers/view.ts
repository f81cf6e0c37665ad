import type { HeadVariant, VariantValues } from "../rules/headTypes.ts";
import { variantNames } from "../variants/index.ts";
import { chainRowJacobian, rowwiseValue } from "../rules/rowwise.ts";
import type { ExampleArray, LayerSettings, LayerView } from "./types.ts";

/**
 * Small helpers for rules: reading a traced layer's input, extras and settings with errors that
 * name the layer, and building a value per variant.
 */

/**
 * The layer's input at this example.
 *
 * @throws RangeError naming the layer when the trace did not keep its input.
 * @example const [n, d] = input(layer).shape;
 */
export function input(layer: LayerView<unknown>): ExampleArray {
  if (layer.input === null) throw new RangeError(`${layer.name}: the trace holds no input`);
  return layer.input;
}

/**
 * One of the layer's extra tensors at this example.
 *
 * @throws RangeError naming the layer and the missing tensor.
 * @example extra(layer, "p").shape // [H, n, n]
 */
export function extra(layer: LayerView<unknown>, key: string): ExampleArray {
  const a = layer.extras[key];
  if (a === undefined) throw new RangeError(`${layer.name}: the trace holds no "${key}"`);
  return a;
}

/**
 * A setting of a layer.
 *
 * @throws RangeError naming the layer when the setting is missing.
 * @example setting({ eps: 1e-5 }, "eps", "blocks.0.ln1") // 1e-5
 */
export function setting(
  settings: LayerSettings,
  key: string,
  name: string,
): number | string | boolean {
  const v = settings[key];
  if (v === undefined) throw new RangeError(`${name}: setting "${key}" is missing`);
  return v;
}

/**
 * A value per variant (docs/math.md section 2) from a function of the variant, for `variants`
 * (default: the registered variants of dot-product attention).
 *
 * @example perVariant(() => 1)["t3-exact"] // 1
 */
export function perVariant(
  fn: (name: HeadVariant) => number,
  variants: readonly HeadVariant[] = variantNames("dot"),
): VariantValues {
  const out = {} as VariantValues;
  for (const name of variants) out[name] = fn(name);
  return out;
}

/**
 * The exact local value of a row-wise entry: max over its input's rows of ||J_i||_2 (its
 * rowJacobian), or null when the entry is not row-wise (docs/math.md section 3, "Row-wise runs").
 *
 * @throws RangeError when the entry has no input.
 * @example exactRowwise(view) // max_i ||I + J_LN,i J_MLP,i|| for a pre-LN MLP residual
 */
export function exactRowwise(layer: LayerView<unknown>): number | null {
  const [n, d] = input(layer).shape;
  if (!layer.rowwise || n === 0) return null;
  return rowwiseValue((i) => layer.rowJacobian(i)!.matrix(), n, d);
}

/**
 * The [start, end) ranges of at least `min` (default 2) consecutive children that are row-wise.
 *
 * @example rowwiseRuns(postLnBlock.childViews) // [[1, 4]]: LN1, the MLP residual, LN2
 */
export function rowwiseRuns(children: readonly LayerView<unknown>[], min = 2): [number, number][] {
  const runs: [number, number][] = [];
  let start = -1;
  children.forEach((c, k) => {
    const rowwise = c.rowwise && c.input !== null && c.input.shape[0] > 0;
    if (rowwise && start < 0) start = k;
    if (!rowwise && start >= 0) {
      if (k - start >= min) runs.push([start, k]);
      start = -1;
    }
  });
  if (start >= 0 && children.length - start >= min) runs.push([start, children.length]);
  return runs;
}

/**
 * The bound of a composite's children in sequence, per variant (docs/math.md section 3): the
 * product of their bounds, except that
 * - a run of two or more row-wise children is bounded exactly as one row-wise map when
 *   options.mlp is "local" ("Row-wise runs");
 * - a row-wise run followed by a child whose kind bounds itself after a row-wise map
 *   (ruleAfterRowwise: attention's `fused`) is bounded jointly with it for the variants that
 *   kind gives ("A row-wise map fused into the next layer");
 * - otherwise, a row-wise run preceded by a child whose kind bounds itself before a row-wise
 *   map (ruleBeforeRowwise: a residual whose branch ends in attention, `fused`) is bounded
 *   jointly with that child where this is smaller than the product ("A row-wise run fused into
 *   the layer before it").
 *
 * @returns a value per variant of layer.options.variants.
 * @example composeChildren(preLnAttentionResidual)["fused"] // ||D(attention o LN1)|| bound
 */
export function composeChildren(layer: LayerView<unknown>): VariantValues {
  const kids = layer.childViews;
  const variants = layer.options.variants;
  const out = perVariant(() => 1, variants);
  let k = 0;
  for (const [start, end] of [
    ...rowwiseRuns(kids, 1),
    [kids.length, kids.length] as [number, number],
  ]) {
    // The child just before a run may be bounded jointly with it (below); the others multiply.
    const lastBefore = start < kids.length && start > k ? start - 1 : -1;
    for (; k < start; k++)
      if (k !== lastBefore) for (const v of variants) out[v] *= layer.children[k][v];
    if (start === end) break;
    const views = kids.slice(start, end);
    let run = perVariant(
      (v) => views.reduce((p, _, c) => p * layer.children[start + c][v], 1),
      variants,
    );
    if (end - start >= 2 && layer.options.mlp === "local") {
      const exact = exactRowwise({
        ...views[0],
        rowwise: true,
        rowJacobian: (row) => chainRowJacobian(views, row),
      });
      if (exact !== null) run = perVariant(() => exact, variants);
    }
    const next = end < kids.length ? kids[end] : null;
    const fused =
      next?.boundAfterRowwise({
        rowJacobian: (row) => chainRowJacobian(views, row)!,
        bound: run,
      }) ?? null;
    // A run not fused into the next child may be fused into the one before it, where that
    // child's kind bounds itself before a row-wise map (a residual whose branch ends in
    // attention: `fused`; docs/math.md section 3, "A row-wise run fused into the layer before it").
    // (It needs the run's row Jacobians: with options.mlp "relaxed" the product is kept.)
    const joint =
      lastBefore >= 0 && fused === null && layer.options.mlp === "local"
        ? kids[lastBefore].boundBeforeRowwise({
            rowJacobian: (row) => chainRowJacobian(views, row)!,
            bound: run,
          })
        : null;
    const runTaken = new Set<string>();
    if (lastBefore >= 0)
      for (const v of variants) {
        const j = joint?.[v];
        if (j === undefined) out[v] *= layer.children[lastBefore][v];
        else {
          out[v] *= Math.min(j, layer.children[lastBefore][v] * run[v]);
          runTaken.add(v);
        }
      }
    if (next !== null && fused !== null) {
      for (const v of variants) out[v] *= fused[v] ?? run[v] * layer.children[end][v];
      k = end + 1;
    } else {
      for (const v of variants) if (!runTaken.has(v)) out[v] *= run[v];
      k = end;
    }
  }
  return out;
}
