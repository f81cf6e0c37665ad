import { spectralNorm } from "./linalg.ts";

/**
 * Weight-only quantities (spectral norms of weight matrices, a head's Gram matrices and their
 * square-root factors) depend on a checkpoint's weights alone, yet on a BERT-base they were most
 * of an analysis (about 5 s per block on this machine: docs/performance.md, "Real size"). This
 * module lets them be computed once per weight content: a quantity is looked up by what it is
 * (`what`, e.g. "spectralNorm 768x3072") and the exact bytes of the arrays it is computed from.
 *
 * The lookup goes to a {@link WeightCacheStore} when one is installed ({@link useWeightCacheStore}:
 * the Node side installs one that keeps the values on disk, src/analysis/weightCacheStore.ts, so a
 * checkpoint's norms are computed by its first analysis only); without one, every call computes
 * (the browser; tests that install none). A stored value is the computed one, bit for bit, so a
 * result never depends on whether the cache held it.
 */

/** Where cached weight quantities live (a Node implementation: src/analysis/weightCacheStore.ts). */
export interface WeightCacheStore {
  /** A key naming `what` and the exact contents (type, length, bytes) of `arrays`. */
  key(what: string, arrays: readonly (Float32Array | Float64Array)[]): string;
  /** The value stored under key, or undefined (a damaged or missing entry is undefined). */
  get(key: string): unknown;
  /** Stores value (structured-cloneable: numbers, typed arrays, plain objects) under key. */
  set(key: string, value: unknown): void;
}

let store: WeightCacheStore | null = null;

/**
 * Installs the store that {@link cachedWeightQuantity} uses (null: none, compute every time).
 *
 * @returns the store that was installed before.
 * @example const before = useWeightCacheStore(diskStore); ...; useWeightCacheStore(before);
 */
export function useWeightCacheStore(next: WeightCacheStore | null): WeightCacheStore | null {
  const before = store;
  store = next;
  return before;
}

/** The store in use, or null. */
export function weightCacheStore(): WeightCacheStore | null {
  return store;
}

/**
 * compute(), or the value it gave before for the same `what` and the same array contents.
 *
 * @param what names the quantity and everything besides the arrays that it depends on (sizes,
 *   settings), e.g. `spectralNorm 768x768`.
 * @param arrays the weight arrays it is computed from (read, never kept or changed).
 * @param compute computes it; its result must be structured-cloneable.
 * @param accept whether a stored value has the type and sizes compute() gives: a stored value it
 *   refuses is treated as missing (computed again and stored anew), never returned.
 * @returns compute()'s value (a stored copy of it when the store held one that `accept` takes).
 * @example const n = cachedWeightQuantity(`spectralNorm ${d}x${d}`, [wo], () => spectralNorm(wo, d, d), isNorm);
 */
export function cachedWeightQuantity<T>(
  what: string,
  arrays: readonly (Float32Array | Float64Array)[],
  compute: () => T,
  accept: (value: unknown) => value is T,
): T {
  const s = store;
  if (s === null) return compute();
  const key = s.key(what, arrays);
  const hit = s.get(key);
  if (hit !== undefined && accept(hit)) return hit;
  const value = compute();
  s.set(key, value);
  return value;
}

/**
 * Whether a stored value can be a norm: a number that is finite and >= 0 (an `accept` for
 * {@link cachedWeightQuantity}).
 *
 * @example isNorm(2.5) // true; isNorm("2.5") and isNorm(-1) are false
 */
export function isNorm(value: unknown): value is number {
  return typeof value === "number" && Number.isFinite(value) && value >= 0;
}

/**
 * ||M||_2 of a weight matrix (linalg's exact spectralNorm), through {@link cachedWeightQuantity}:
 * computed once per weight content when a store is installed.
 *
 * @param m row-major [rows, cols] weights. @returns ||M||_2 >= 0.
 * @throws RangeError as spectralNorm (wrong length, non-finite entries).
 * @example weightSpectralNorm(params.wo.data, d, d)
 */
export function weightSpectralNorm(
  m: Float32Array | Float64Array,
  rows: number,
  cols: number,
): number {
  return cachedWeightQuantity(
    `spectralNorm ${rows}x${cols}`,
    [m],
    () => spectralNorm(m, rows, cols),
    isNorm,
  );
}

/**
 * Whether {@link weightSpectralNorm} of this matrix would be read from the store (a store is
 * installed and holds a valid norm for these exact contents): lets a time estimate know whether
 * the weight norms are still to be computed.
 *
 * @param m row-major [rows, cols] weights. @returns false when no store is installed.
 * @example weightSpectralNormCached(w2.data, 3072, 768)
 */
export function weightSpectralNormCached(m: Float32Array | Float64Array, rows: number, cols: number): boolean {
  const s = store;
  return s !== null && isNorm(s.get(s.key(`spectralNorm ${rows}x${cols}`, [m])));
}
