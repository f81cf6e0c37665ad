import type { NamedArray } from "../nn/params.ts";
import type { LayerSettings } from "../lipschitz/layers/types.ts";

/**
 * Bounds that hold at every input (global Lipschitz constants), per attention layer kind: the
 * radius report draws each as a horizontal line. Dot-product attention has none (it is not
 * globally Lipschitz, Kim, Papamakarios and Mnih, ICML 2021), so no kind registers one yet; an
 * L2 self-attention kind, which is globally Lipschitz, registers its bound here from its own
 * file, and the radius code needs no change.
 */

/** One global bound of a layer: a name (a variant or a formula's name) and its value. */
export interface GlobalBound {
  name: string;
  value: number;
}

/** A kind's global bounds from its weights (by role) and settings. */
export type GlobalBoundFn = (
  params: Readonly<Record<string, NamedArray>>,
  settings: LayerSettings,
) => GlobalBound[];

const HOOKS = new Map<string, GlobalBoundFn>();

/**
 * Registers the global bounds of an attention layer kind.
 *
 * @throws Error when the kind already has one (and replace is not set).
 * @example registerGlobalBound("l2Attention", (p, s) => [{ name: "kim", value: 3.2 }]);
 */
export function registerGlobalBound(
  kind: string,
  fn: GlobalBoundFn,
  options: { replace?: boolean } = {},
): void {
  if (HOOKS.has(kind) && !options.replace)
    throw new Error(`registerGlobalBound: kind "${kind}" already has global bounds`);
  HOOKS.set(kind, fn);
}

/**
 * Removes a kind's global bounds (for tests).
 *
 * @returns whether there were some.
 */
export function unregisterGlobalBound(kind: string): boolean {
  return HOOKS.delete(kind);
}

/**
 * The global bounds of a layer of `kind` ([] when its kind registered none).
 *
 * @throws RangeError when a bound is not finite and >= 0.
 * @example globalBounds("attention", params, { heads: 2 }) // []
 */
export function globalBounds(
  kind: string,
  params: Readonly<Record<string, NamedArray>>,
  settings: LayerSettings,
): GlobalBound[] {
  const fn = HOOKS.get(kind);
  if (fn === undefined) return [];
  const out = fn(params, settings);
  for (const b of out)
    if (!(b.value >= 0) || !Number.isFinite(b.value))
      throw new RangeError(`global bound "${b.name}" of kind "${kind}" is ${b.value}`);
  return out;
}
