/** Seeded PRNG for tests: the same mulberry32 that seeds weight initialisation. */
export { mulberry32 } from "../../src/nn/prng.ts";

/** Standard normal sample by Box-Muller. */
export function gaussian(rand: () => number): number {
  const u = Math.max(rand(), 1e-300);
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * rand());
}
