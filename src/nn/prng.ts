/**
 * Seeded pseudo-random numbers for weight initialisation. tfjs random ops differ between
 * backends, so parameters are filled on the JS side from these generators and are identical
 * on wasm, cpu and every machine.
 */

/**
 * mulberry32 (Tommy Ettinger's 32-bit generator): uniform floats in [0, 1).
 *
 * @param seed any number; only its low 32 bits are used.
 */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** 32-bit FNV-1a hash of a string, used to give each parameter its own stream. */
export function hashString(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/**
 * A generator for one named parameter: the stream depends on (seed, name) only, so adding a
 * parameter does not change the values of the others.
 */
export function streamFor(seed: number, name: string): () => number {
  return mulberry32((hashString(name) ^ Math.imul(seed >>> 0, 0x9e3779b1)) >>> 0);
}

/** Fills `out` with N(mean, std^2) samples (Box-Muller). */
export function fillNormal(
  out: Float32Array,
  rand: () => number,
  std: number,
  mean = 0,
): Float32Array {
  for (let i = 0; i < out.length; i++) {
    const u = Math.max(rand(), 1e-300);
    out[i] = mean + std * Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * rand());
  }
  return out;
}

/** Fills `out` with Uniform(-limit, limit) samples. */
export function fillUniform(out: Float32Array, rand: () => number, limit: number): Float32Array {
  for (let i = 0; i < out.length; i++) out[i] = (2 * rand() - 1) * limit;
  return out;
}
