import { max, mean, min, quantileSorted } from "simple-statistics";

/** Summary statistics of a sample, as reported by `analyze` and `sigma --file`. */
export interface Summary {
  count: number;
  mean: number;
  min: number;
  q1: number;
  median: number;
  q3: number;
  max: number;
}

/**
 * Mean, extremes and quartiles of a finite sample (simple-statistics' quantiles, linear
 * interpolation between order statistics).
 *
 * @throws RangeError when the sample is empty or holds a non-finite value.
 */
export function summarize(values: ArrayLike<number>, name = "values"): Summary {
  if (values.length === 0) throw new RangeError(`${name}: cannot summarize an empty sample`);
  const sorted = Array.from(values).sort((a, b) => a - b);
  if (!sorted.every(Number.isFinite)) throw new RangeError(`${name}: sample holds a non-finite value`);
  return {
    count: sorted.length,
    mean: mean(sorted),
    min: min(sorted),
    q1: quantileSorted(sorted, 0.25),
    median: quantileSorted(sorted, 0.5),
    q3: quantileSorted(sorted, 0.75),
    max: max(sorted),
  };
}
