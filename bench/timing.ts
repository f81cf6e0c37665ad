/**
 * Timing helpers for `npm run bench`: every figure is printed as a ratio against a
 * reference measured in the same process, because absolute times drift between machines.
 */

/** Median milliseconds per call of fn over repeated batches of at least minMs each. */
export function timeMs(fn: () => void, options: { warmup?: number; repeats?: number; minMs?: number } = {}): number {
  const { warmup = 2, repeats = 5, minMs = 50 } = options;
  for (let i = 0; i < warmup; i++) fn();
  const samples: number[] = [];
  for (let r = 0; r < repeats; r++) {
    let calls = 0;
    const start = performance.now();
    let elapsed = 0;
    do {
      fn();
      calls++;
      elapsed = performance.now() - start;
    } while (elapsed < minMs);
    samples.push(elapsed / calls);
  }
  samples.sort((a, b) => a - b);
  return samples[Math.floor(samples.length / 2)];
}

/** Same as {@link timeMs} for async work. */
export async function timeMsAsync(fn: () => Promise<void>, options: { warmup?: number; repeats?: number; minMs?: number } = {}): Promise<number> {
  const { warmup = 1, repeats = 5, minMs = 50 } = options;
  for (let i = 0; i < warmup; i++) await fn();
  const samples: number[] = [];
  for (let r = 0; r < repeats; r++) {
    let calls = 0;
    const start = performance.now();
    let elapsed = 0;
    do {
      await fn();
      calls++;
      elapsed = performance.now() - start;
    } while (elapsed < minMs);
    samples.push(elapsed / calls);
  }
  samples.sort((a, b) => a - b);
  return samples[Math.floor(samples.length / 2)];
}
