import type { MeanInterval } from "./statistics.ts";

/**
 * A study's groups as study.json holds them (aggregate.ts builds them, verdict.ts checks the
 * paper's claims on them, table.ts prints them): types only.
 */

/** One lambda of a group: its seeds and statistics. */
export interface LambdaStatistics {
  lambda: number;
  seeds: number[];
  /** Per metric: mean and 95% interval over the seeds. */
  metrics: Record<string, MeanInterval | null>;
  /**
   * Per metric: each run's own value, in `seeds` order (null where the run has none), from
   * which `metrics` and `difference` can be recomputed by anyone (study/recompute.ts). Absent in studies aggregated before it was kept.
   */
  values?: Record<string, (number | null)[]>;
  /**
   * Per metric: the paired difference (this lambda minus lambda 0, same seed), mean and 95%
   * interval; absent for lambda 0 itself and when the group has no lambda 0.
   */
  difference?: Record<string, MeanInterval | null>;
}

/** Runs that differ only in lambda and seed. */
export interface StudyGroup {
  data: string;
  model: string;
  jasminNorm: string;
  reduce: string;
  lambdas: LambdaStatistics[];
  /** The paper's claims checked on this group, one sentence each (verdict.ts verdictLines). */
  verdict: string[];
}
