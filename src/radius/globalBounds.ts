import type { NamedArray } from "../nn/params.ts";
import { layerKind } from "../lipschitz/layers/index.ts";
import type { LayerSettings } from "../lipschitz/layers/types.ts";

/**
 * Bounds that hold at every input (global Lipschitz constants) of an attention layer: the radius
 * report draws each as a horizontal line. They come from the layer's kind (its `globalBounds`,
 * lipschitz/layers/types.ts): L2 self-attention gives Kim et al.'s `kim`; dot-product attention
 * gives none, as it is not globally Lipschitz (Kim, Papamakarios and Mnih, ICML 2021, Theorem
 * 3.1). A new globally Lipschitz kind declares its own in its file, and the radius code needs
 * no change.
 */

/** One global bound of a layer: a name (a variant or a formula's name) and its value. */
export interface GlobalBound {
  name: string;
  value: number;
}

/**
 * The global bounds of a layer of `kind` on inputs of `n` tokens without masked keys ([] when its
 * kind declares none).
 *
 * @param params the layer's weights by role; settings its settings (heads).
 * @throws RangeError when a bound is not finite and >= 0; Error from the kind's prepare on
 *   misshapen weights.
 * @example globalBounds("attention", params, { heads: 2 }, 17) // []
 */
export function globalBounds(
  kind: string,
  params: Readonly<Record<string, NamedArray>>,
  settings: LayerSettings,
  n: number,
): GlobalBound[] {
  const spec = layerKind(kind);
  if (spec.globalBounds === undefined) return [];
  const prepared = spec.prepare === undefined ? undefined : spec.prepare(params, settings, kind);
  const out = spec.globalBounds(prepared, n);
  for (const b of out)
    if (!(b.value >= 0) || !Number.isFinite(b.value))
      throw new RangeError(`global bound "${b.name}" of kind "${kind}" is ${b.value}`);
  return out;
}
