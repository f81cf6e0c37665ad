import {
  mulberry32,
  fillNormal,
  type NamedArray,
  type TransformerClassifier,
} from "../../src/nn/index.ts";

/**
 * Replaces every weight with seeded N(0, std^2) values (LayerNorm gammas around 1), so that
 * biases, gammas and betas are exercised by the reference comparisons.
 */
export function randomizeWeights(model: TransformerClassifier, seed: number, std = 0.2): void {
  const rand = mulberry32(seed);
  const out = new Map<string, NamedArray>();
  for (const [name, w] of model.getWeights()) {
    const data = fillNormal(
      new Float32Array(w.data.length),
      rand,
      name.endsWith("gamma") ? 0.1 : std,
      name.endsWith("gamma") ? 1 : 0,
    );
    out.set(name, { data, shape: w.shape });
  }
  model.setWeights(out);
}

/** max |a - b| / max(1, max |b|). */
export function relError(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) throw new Error(`length ${a.length} vs ${b.length}`);
  let diff = 0;
  let scale = 1;
  for (let i = 0; i < a.length; i++) {
    diff = Math.max(diff, Math.abs(a[i] - b[i]));
    scale = Math.max(scale, Math.abs(b[i]));
  }
  return diff / scale;
}

/** Seeded uniform values in [lo, hi). */
export function uniform(n: number, seed: number, lo = 0, hi = 1): Float32Array {
  const rand = mulberry32(seed);
  return Float32Array.from({ length: n }, () => lo + (hi - lo) * rand());
}

/** Seeded integers in [0, max). */
export function randomInts(n: number, seed: number, max: number): Int32Array {
  const rand = mulberry32(seed);
  return Int32Array.from({ length: n }, () => Math.floor(rand() * max));
}

/** True when every entry is finite. */
export function allFinite(values: ArrayLike<number>): boolean {
  for (let i = 0; i < values.length; i++) if (!Number.isFinite(values[i])) return false;
  return true;
}
