/**
 * Learning-rate schedule: linear warm-up, then cosine decay (Loshchilov & Hutter 2017, without
 * restarts) towards `minLr`, which is reached at step `totalSteps`, one step after the last
 * update (the usual convention: the last update, step totalSteps - 1, still uses a rate just
 * above minLr).
 */

/** Settings of {@link learningRateAt}. */
export interface ScheduleOptions {
  /** Peak learning rate (reached at the end of warm-up). */
  lr: number;
  /** Warm-up steps (0: none). */
  warmupSteps: number;
  /** Total optimizer steps of the run (all epochs). */
  totalSteps: number;
  /** Learning rate at the end of the decay (default 0). */
  minLr?: number;
}

/**
 * The learning rate of optimizer step `step` (0-based: the first update is step 0).
 *
 * Warm-up: lr * (step + 1) / warmupSteps for step < warmupSteps (so the first update is not
 * wasted at 0). Then cosine: minLr + (lr - minLr) * (1 + cos(pi * t)) / 2 with
 * t = (step - warmupSteps) / max(1, totalSteps - warmupSteps), clamped to [0, 1], so t = 1
 * (the rate minLr) first at step totalSteps, after the run's last update.
 *
 * @throws RangeError when step is not an integer >= 0 or a setting is negative / not finite.
 */
export function learningRateAt(step: number, options: ScheduleOptions): number {
  const { lr, warmupSteps, totalSteps } = options;
  const minLr = options.minLr ?? 0;
  if (!Number.isInteger(step) || step < 0)
    throw new RangeError(`schedule: step must be an integer >= 0, got ${step}`);
  for (const [name, v] of [
    ["lr", lr],
    ["warmupSteps", warmupSteps],
    ["totalSteps", totalSteps],
    ["minLr", minLr],
  ] as const)
    if (!Number.isFinite(v) || v < 0) throw new RangeError(`schedule: ${name} must be finite and >= 0, got ${v}`);
  if (step < warmupSteps) return (lr * (step + 1)) / warmupSteps;
  const t = Math.min(1, Math.max(0, (step - warmupSteps) / Math.max(1, totalSteps - warmupSteps)));
  return minLr + ((lr - minLr) * (1 + Math.cos(Math.PI * t))) / 2;
}
