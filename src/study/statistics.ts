import tQuantile from "@stdlib/stats-base-dists-t-quantile";
import { mean, sampleStandardDeviation } from "simple-statistics";

/**
 * A mean over seeds with its 95% confidence interval from Student's t distribution:
 * mean +- t_{0.975, n-1} * s / sqrt(n), s the sample standard deviation (n - 1 in the
 * denominator). With one value the interval is unknown (null); the t quantile comes from
 * stdlib (@stdlib/stats-base-dists-t-quantile), not from a table.
 */
export interface MeanInterval {
  /** Values behind the mean (seeds with a finite value). */
  n: number;
  mean: number;
  /** Sample standard deviation; null when n < 2. */
  sd: number | null;
  /** Half-width of the 95% interval; null when n < 2. */
  halfWidth: number | null;
  /** mean - halfWidth, mean + halfWidth; null when n < 2. */
  low: number | null;
  high: number | null;
}

/**
 * Mean and 95% Student-t interval of the finite values (non-finite ones and nulls are left
 * out and not counted).
 *
 * @returns null when no value is finite.
 * @example meanInterval([0.9, 0.92, 0.94]) // { n: 3, mean: 0.92, sd: 0.02, halfWidth: 0.0497, low: 0.8703, high: 0.9697 }
 */
export function meanInterval(values: readonly (number | null)[]): MeanInterval | null {
  const xs = values.filter((v): v is number => v !== null && Number.isFinite(v));
  if (xs.length === 0) return null;
  const m = mean(xs);
  if (xs.length < 2) return { n: 1, mean: m, sd: null, halfWidth: null, low: null, high: null };
  const sd = sampleStandardDeviation(xs);
  const halfWidth = tQuantile(0.975, xs.length - 1) * (sd / Math.sqrt(xs.length));
  return { n: xs.length, mean: m, sd, halfWidth, low: m - halfWidth, high: m + halfWidth };
}

/**
 * Paired differences treated - control over the keys both have (the same seed), with their
 * mean and 95% Student-t interval (a paired t interval: the seed's own effect cancels).
 *
 * @returns null when no key has a finite value in both.
 * @example pairedDifference(new Map([[0, 2], [1, 3]]), new Map([[0, 1], [1, 1]])) // mean 1.5, n 2
 */
export function pairedDifference<K>(
  treated: ReadonlyMap<K, number | null>,
  control: ReadonlyMap<K, number | null>,
): MeanInterval | null {
  const diffs: number[] = [];
  for (const [k, t] of treated) {
    const c = control.get(k);
    if (t !== null && c !== null && c !== undefined && Number.isFinite(t) && Number.isFinite(c)) diffs.push(t - c);
  }
  return meanInterval(diffs);
}
