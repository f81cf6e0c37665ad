import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "csv-stringify/sync";
import { InputError } from "../util/errors.ts";
import { readRunResult, type RunResult } from "./result.ts";
import { meanInterval, pairedDifference } from "./statistics.ts";
import { verdictLines } from "./verdict.ts";
import type { LambdaStatistics, StudyGroup } from "./group.ts";
import { expandGrid, readGridFile } from "./grid.ts";
import { PRETRAIN_FOLDER, pretrainBases, readPretrained } from "./pretrain.ts";

/**
 * A study's runs combined: per group of runs that differ only in lambda and seed (same data,
 * model, JaSMin norm and reduction), per lambda, every metric's mean over seeds with its 95%
 * Student-t interval, and its paired difference against lambda 0 with the same seed.
 */

/** The metrics of one run, by name ({@link runMetrics}). */
export type RunMetrics = Record<string, number | null>;

export type { LambdaStatistics, StudyGroup } from "./group.ts";

/** study.json. */
export interface StudySummary {
  format: "attnlip-study";
  version: 1;
  /** Finished runs combined (result.json present). */
  finished: number;
  /** Runs not finished: those of the grid without a result (not started, running or stopped), and run folders without one. */
  unfinished: string[];
  /** Runs in the study's grid (study-grid.json), or null when the folder has none. */
  planned: number | null;
  /** What each metric name means. */
  metricNotes: Record<string, string>;
  groups: StudyGroup[];
  /**
   * The pretrained models every run fine-tunes (grid field train.pretrainEpochs), finished or
   * not (testAccuracy null until then); absent when the runs train from scratch.
   */
  pretrained?: { id: string; epochs: number; testAccuracy: number | null; seconds: number | null }[];
}

/** What the metric names mean (prefixes for the families). */
export const METRIC_NOTES: Record<string, string> = {
  cleanAccuracy: "test accuracy on the held-out test split after training (all of it unless the grid sets train.testLimit), in [0, 1]",
  attackedCleanAccuracy: "clean accuracy of the attacked test inputs (the first attack.n of the split)",
  "robust:NORM:ATTACK:eps=E": "robust accuracy under ATTACK with radius E in NORM (input units: pixels in [0, 1], or embedding units)",
  "zeroGradient:NORM:ATTACK:eps=E": "fraction of attacked inputs whose loss gradient was exactly zero (gradient masking where > 0)",
  networkTrue: "median over the analysed inputs of the network's true local Lipschitz constant (exact spectral norm of the input Jacobian)",
  "blockTrue:i": "median true local Lipschitz constant of block i (Lanczos estimate from below)",
  compositionFloor: "median composition floor: product of the block true values and the factors outside the blocks",
  meanSigma: "mean exact softmax-Jacobian spectral norm sigma(p) of the sampled attention rows",
  meanTop1: "mean largest attention probability p_(1) of the sampled attention rows",
  "networkRatio:VARIANT": "median network bound / true value of a bound variant",
  "blockRatio:i:VARIANT": "median block bound / true value of a bound variant",
};

/**
 * A run's metrics by name (see {@link METRIC_NOTES}).
 *
 * @example runMetrics(result)["robust:linf:apgd:eps=0.1"] // 0.62
 */
export function runMetrics(r: RunResult): RunMetrics {
  const m: RunMetrics = {
    cleanAccuracy: r.cleanAccuracy,
    attackedCleanAccuracy: Number.isFinite(r.attackedCleanAccuracy) ? r.attackedCleanAccuracy : null,
  };
  for (const p of r.robust) m[`robust:${p.norm}:${p.attack}:eps=${p.eps}`] = p.accuracy;
  for (const p of r.robust) m[`zeroGradient:${p.norm}:${p.attack}:eps=${p.eps}`] = p.zeroGradient;
  m.networkTrue = r.networkTrue;
  r.blockTrue.forEach((v, i) => (m[`blockTrue:${i}`] = v));
  m.compositionFloor = r.compositionFloor;
  m.meanSigma = r.meanSigma;
  m.meanTop1 = r.meanTop1;
  for (const [v, x] of Object.entries(r.networkRatio)) m[`networkRatio:${v}`] = x;
  r.blockRatio.forEach((ratios, i) => {
    for (const [v, x] of Object.entries(ratios)) m[`blockRatio:${i}:${v}`] = x;
  });
  return m;
}

/**
 * Combines finished runs ({@link StudySummary}): groups by data, model, JaSMin norm and
 * reduction; per lambda (ascending) the mean and 95% Student-t interval over seeds of every
 * metric; paired differences against lambda 0 of the same group and seed.
 *
 * @example aggregateResults([run0seed0, run0seed1, run1seed0, run1seed1]).groups[0].lambdas[1].difference!.cleanAccuracy
 */
export function aggregateResults(results: readonly RunResult[], unfinished: readonly string[] = [], planned: number | null = null): StudySummary {
  const groups = new Map<string, RunResult[]>();
  for (const r of results) {
    const key = JSON.stringify([r.data, r.model, r.jasminNorm, r.reduce]);
    groups.set(key, [...(groups.get(key) ?? []), r]);
  }
  const out: StudyGroup[] = [];
  for (const runs of groups.values()) {
    const lambdas = [...new Set(runs.map((r) => r.lambda))].sort((a, b) => a - b);
    const metricsOf = new Map(runs.map((r) => [r, runMetrics(r)]));
    const names = [...new Set(runs.flatMap((r) => Object.keys(metricsOf.get(r)!)))];
    const bySeed = (lambda: number, name: string) =>
      new Map(runs.filter((r) => r.lambda === lambda).map((r) => [r.seed, metricsOf.get(r)![name] ?? null]));
    const hasControl = lambdas[0] === 0;
    const group: Omit<StudyGroup, "verdict"> = {
      data: runs[0].data,
      model: runs[0].model,
      jasminNorm: runs[0].jasminNorm,
      reduce: runs[0].reduce,
      lambdas: lambdas.map((lambda) => {
        const here = runs.filter((r) => r.lambda === lambda);
        const seeds = here.map((r) => r.seed).sort((a, b) => a - b);
        const stats: LambdaStatistics = {
          lambda,
          seeds,
          metrics: Object.fromEntries(names.map((n) => [n, meanInterval([...bySeed(lambda, n).values()])])),
          values: Object.fromEntries(names.map((n) => [n, seeds.map((seed) => bySeed(lambda, n).get(seed) ?? null)])),
        };
        if (hasControl && lambda !== 0)
          stats.difference = Object.fromEntries(names.map((n) => [n, pairedDifference(bySeed(lambda, n), bySeed(0, n))]));
        return stats;
      }),
    };
    out.push({ ...group, verdict: verdictLines({ ...group, verdict: [] }) });
  }
  return { format: "attnlip-study", version: 1, finished: results.length, unfinished: [...unfinished], planned, metricNotes: METRIC_NOTES, groups: out };
}

/** The runs folder of a study. */
export const RUNS_FOLDER = "runs";

/**
 * Reads every finished run under STUDY/runs/ (result.json) and aggregates them; the runs of
 * the grid (study-grid.json) without a result are listed as unfinished, started or not.
 *
 * @throws InputError when DIR has no runs folder, or study-grid.json or a result.json is malformed.
 * @example const summary = await aggregateStudy("study"); summary.finished // 12
 */
export async function aggregateStudy(dir: string): Promise<StudySummary> {
  const runsDir = join(dir, RUNS_FOLDER);
  if (!existsSync(runsDir)) throw new InputError(`study: ${dir}: no ${RUNS_FOLDER}/ folder: not a study folder (attnlip study writes one)`);
  const grid = readGridFile(dir);
  const planned = grid === null ? null : expandGrid(grid).map((r) => r.id);
  const results: RunResult[] = [];
  const unfinished: string[] = [];
  const names = [...new Set([...(planned ?? []), ...readdirSync(runsDir)])].sort();
  for (const name of names) {
    const r = await readRunResult(join(runsDir, name));
    if (r === null) unfinished.push(name);
    else results.push(r);
  }
  const summary = aggregateResults(results, unfinished, planned === null ? null : planned.length);
  const bases = grid === null ? [] : pretrainBases(grid, expandGrid(grid));
  if (bases.length > 0)
    summary.pretrained = bases.map(({ id }) => {
      const p = readPretrained(join(dir, PRETRAIN_FOLDER, id));
      return { id, epochs: grid!.train.pretrainEpochs!, testAccuracy: p?.testAccuracy ?? null, seconds: p?.seconds ?? null };
    });
  return summary;
}

const cell = (x: number | null | undefined) => (x === null || x === undefined ? "" : x);

/**
 * study.csv: one row per group, lambda and metric: the seeds' mean, standard deviation and 95%
 * interval, and the paired difference against lambda 0 (mean and interval; empty where absent).
 */
export function studyCsv(summary: StudySummary): string {
  const rows: (string | number)[][] = [
    ["data", "model", "jasmin_norm", "reduce", "lambda", "metric", "n", "mean", "sd", "ci95_low", "ci95_high", "diff_n", "diff_mean", "diff_ci95_low", "diff_ci95_high"],
  ];
  for (const g of summary.groups)
    for (const l of g.lambdas)
      for (const [name, s] of Object.entries(l.metrics)) {
        const d = l.difference?.[name] ?? null;
        rows.push([g.data, g.model, g.jasminNorm, g.reduce, l.lambda, name, cell(s?.n), cell(s?.mean), cell(s?.sd), cell(s?.low), cell(s?.high), cell(d?.n), cell(d?.mean), cell(d?.low), cell(d?.high)]);
      }
  return stringify(rows);
}
