import type { LambdaStatistics, StudyGroup } from "./group.ts";
import { meanInterval, pairedDifference, type MeanInterval } from "./statistics.ts";

/**
 * A study's statistics recomputed from its runs' own values (study.json's `values`): the mean
 * and 95% interval over seeds of each metric per lambda, and the paired difference from lambda
 * 0 with the same seed. What a reader of a committed study can check its pages with.
 *
 * @param group a study.json group whose lambdas hold `values`.
 * @returns per lambda (as in group.lambdas) the recomputed `metrics` and `difference`.
 * @throws Error naming the lambda when its `values` are missing or a list's length is not
 *   its seeds' count.
 * @example recomputedStatistics(study.groups[0])[1].difference.cleanAccuracy
 */
export function recomputedStatistics(
  group: Pick<StudyGroup, "lambdas">,
): { lambda: number; metrics: Record<string, MeanInterval | null>; difference?: Record<string, MeanInterval | null> }[] {
  const bySeed = (l: LambdaStatistics, name: string): Map<number, number | null> => {
    const values = l.values?.[name];
    if (values === undefined) throw new Error(`recomputedStatistics: lambda ${l.lambda} has no values of "${name}" (a study aggregated before runs' values were kept)`);
    if (values.length !== l.seeds.length)
      throw new Error(`recomputedStatistics: lambda ${l.lambda}: "${name}" has ${values.length} values for ${l.seeds.length} seeds`);
    return new Map(l.seeds.map((seed, i) => [seed, values[i]]));
  };
  const control = group.lambdas.find((l) => l.lambda === 0);
  return group.lambdas.map((l) => {
    if (l.values === undefined) throw new Error(`recomputedStatistics: lambda ${l.lambda} has no values (a study aggregated before runs' values were kept)`);
    const names = Object.keys(l.values);
    const metrics = Object.fromEntries(names.map((n) => [n, meanInterval([...bySeed(l, n).values()])]));
    if (control === undefined || l.lambda === 0) return { lambda: l.lambda, metrics };
    return { lambda: l.lambda, metrics, difference: Object.fromEntries(names.map((n) => [n, pairedDifference(bySeed(l, n), bySeed(control, n))])) };
  });
}
