import { summarize, type Summary } from "../stats.ts";
import type { MetricRecord, RunData } from "./load.ts";

/**
 * The numbers behind the report's charts and tables, computed from loaded runs (pure
 * functions, no rendering).
 */

/** Layer names in network order: block.0, block.1, ..., other names, then network. */
export function layerOrder(names: string[]): string[] {
  const blockIndex = (n: string) => {
    const m = /^block\.(\d+)$/.exec(n);
    return m === null ? Infinity : Number(m[1]);
  };
  const rank = (n: string) => (n === "network" ? 2 : blockIndex(n) < Infinity ? 0 : 1);
  return [...names].sort(
    (a, b) => rank(a) - rank(b) || blockIndex(a) - blockIndex(b) || a.localeCompare(b),
  );
}

/** Summary of the finite values of an array (nulls are values not computed), or null if none. */
export function summaryOf(values: readonly (number | null)[] | undefined): Summary | null {
  if (values === undefined) return null;
  const finite = values.filter((v): v is number => typeof v === "number" && Number.isFinite(v));
  return finite.length === 0 ? null : summarize(finite);
}

/** Per layer of one run: the summary of each bound variant, of the true value and of each ratio. */
export interface LayerSummary {
  layer: string;
  bounds: Record<string, Summary | null>;
  true: Summary | null;
  ratios: Record<string, Summary | null>;
  /** The network's composition floor (analysis.json layers.network.compositionFloor; null elsewhere and in older files). */
  floor: Summary | null;
}

/** Summaries of every layer of a run, in network order. */
export function layerSummaries(run: RunData): LayerSummary[] {
  const { layers, variants } = run.analysis;
  return layerOrder(Object.keys(layers)).map((layer) => {
    const l = layers[layer] as Record<string, unknown> & {
      true?: (number | null)[];
      ratio?: Record<string, (number | null)[]>;
      compositionFloor?: (number | null)[];
    };
    const bounds: Record<string, Summary | null> = {};
    const ratios: Record<string, Summary | null> = {};
    for (const v of variants) {
      bounds[v] = summaryOf(l[v] as (number | null)[]);
      ratios[v] = summaryOf(l.ratio?.[v]);
    }
    const floor = Array.isArray(l.compositionFloor) ? summaryOf(l.compositionFloor) : null;
    return { layer, bounds, true: summaryOf(l.true), ratios, floor };
  });
}

/** One point of the bounds-against-truth chart. */
export interface BoundPoint {
  run: string;
  layer: string;
  series: string;
  median: number;
  q1: number;
  q3: number;
}

/** Median (and quartiles) of every variant and of `true` per layer and run; positive values only (log scale). */
export function boundPoints(runs: RunData[]): BoundPoint[] {
  const points: BoundPoint[] = [];
  for (const run of runs)
    for (const s of layerSummaries(run)) {
      const series: [string, Summary | null][] = [
        ...Object.entries(s.bounds),
        ["true", s.true],
        ...(s.floor !== null ? ([["composition floor", s.floor]] as [string, Summary][]) : []),
      ];
      for (const [name, sum] of series)
        if (sum !== null && sum.median > 0)
          points.push({
            run: run.name,
            layer: s.layer,
            series: name,
            median: sum.median,
            q1: sum.q1,
            q3: sum.q3,
          });
    }
  return points;
}

/** Every k-th element so that at most `max` remain (deterministic, spread over the whole array). */
export function subsample<T>(values: readonly T[], max: number): T[] {
  if (values.length <= max) return [...values];
  const out: T[] = [];
  for (let i = 0; i < max; i++) out.push(values[Math.floor((i * values.length) / max)]);
  return out;
}

/** One bin of a histogram: [lo, hi) with the fraction of the sample in it. */
export interface Bin {
  lo: number;
  hi: number;
  mid: number;
  fraction: number;
}

/**
 * Histogram of `values` on [lo, hi] with `bins` equal bins (the last one closed), as fractions
 * of the sample (so samples of different sizes compare). Values outside are clamped in.
 */
export function histogram(values: readonly number[], lo: number, hi: number, bins: number): Bin[] {
  const counts = new Array<number>(bins).fill(0);
  let total = 0;
  for (const v of values) {
    if (!Number.isFinite(v)) continue;
    const k = Math.min(bins - 1, Math.max(0, Math.floor(((v - lo) / (hi - lo)) * bins)));
    counts[k]++;
    total++;
  }
  const width = (hi - lo) / bins;
  return counts.map((c, k) => ({
    lo: lo + k * width,
    hi: lo + (k + 1) * width,
    mid: lo + (k + 0.5) * width,
    fraction: total > 0 ? c / total : 0,
  }));
}

/** Epoch-level training records: metrics.jsonl's epoch records, else train_state.json's history. */
export interface EpochPoint {
  run: string;
  epoch: number;
  testAccuracy: number | null;
  meanSigma: number | null;
}

/** Step-level training records (mean sigma over training steps). */
export interface StepPoint {
  run: string;
  step: number;
  meanSigma: number;
}

function isEpochRecord(r: MetricRecord): boolean {
  return r.type === "epoch" || (r.type === undefined && r.testAccuracy !== undefined);
}

/** Training curves of one run, or null when the run has neither metrics.jsonl nor a train_state.json history. */
export function trainingCurves(run: RunData): { epochs: EpochPoint[]; steps: StepPoint[] } | null {
  if (run.metrics !== null && run.metrics.length > 0) {
    const epochs = run.metrics.filter(isEpochRecord).map((r) => ({
      run: run.name,
      epoch: r.epoch,
      testAccuracy: r.testAccuracy ?? null,
      meanSigma: r.meanSigma ?? null,
    }));
    const steps = run.metrics
      .filter(
        (r) => !isEpochRecord(r) && typeof r.step === "number" && typeof r.meanSigma === "number",
      )
      .map((r) => ({ run: run.name, step: r.step as number, meanSigma: r.meanSigma as number }));
    return { epochs, steps };
  }
  const history = run.trainState?.history;
  if (Array.isArray(history) && history.length > 0) {
    const epochs = history
      .filter(
        (h): h is Record<string, unknown> =>
          typeof h === "object" && h !== null && typeof h.epoch === "number",
      )
      .map((h) => ({
        run: run.name,
        epoch: h.epoch as number,
        testAccuracy: typeof h.testAccuracy === "number" ? h.testAccuracy : null,
        meanSigma: typeof h.meanSigma === "number" ? h.meanSigma : null,
      }));
    return { epochs, steps: [] };
  }
  return null;
}

/**
 * An n x n attention map average-pooled to at most `max` x `max` cells (unchanged when n <= max),
 * so that heatmaps of long sequences stay a few thousand SVG rectangles.
 *
 * @returns the pooled size and the cells (row-major).
 */
export function poolMap(
  map: readonly number[],
  n: number,
  max: number,
): { size: number; cells: number[] } {
  if (n <= max) return { size: n, cells: [...map] };
  const factor = Math.ceil(n / max);
  const size = Math.ceil(n / factor);
  const sums = new Array<number>(size * size).fill(0);
  const counts = new Array<number>(size * size).fill(0);
  for (let i = 0; i < n; i++)
    for (let j = 0; j < n; j++) {
      const k = Math.floor(i / factor) * size + Math.floor(j / factor);
      sums[k] += map[i * n + j];
      counts[k]++;
    }
  return { size, cells: sums.map((s, k) => s / counts[k]) };
}

/** Estimated true values, and how many of them did not converge. */
export interface EstimateCount {
  estimates: number;
  unconverged: number;
  /** True values with no convergence record (analysis.json from an older attnlip). */
  unrecorded: number;
}

/** Convergence of one block's estimated true value and of its heads'. */
export interface LayerConvergence {
  layer: string;
  block: EstimateCount;
  heads: EstimateCount;
}

/** Convergence of the estimated (block and head) true values of a run. */
export interface RunConvergence {
  layers: LayerConvergence[];
  /** Over all layers, blocks and heads together. */
  total: EstimateCount;
  /** Method, residual tolerance and cap on products, when analysis.json says. */
  method: string | null;
  tolerance: number | null;
  maxIterations: number | null;
}

/**
 * Counts the estimated true values of one layer or head: entry i is an estimate when the true
 * value beside it is a number; it is unconverged when `converged[i]` is false, unrecorded when
 * there is no boolean there (older files wrote no head records).
 */
function countEstimates(
  truth: readonly (number | null)[] | undefined,
  converged: readonly (boolean | null)[] | undefined,
): EstimateCount {
  const count: EstimateCount = { estimates: 0, unconverged: 0, unrecorded: 0 };
  (truth ?? []).forEach((t, i) => {
    if (typeof t !== "number" || !Number.isFinite(t)) return;
    count.estimates++;
    const c = converged?.[i];
    if (c === false) count.unconverged++;
    else if (typeof c !== "boolean") count.unrecorded++;
  });
  return count;
}

function addCounts(a: EstimateCount, b: EstimateCount): EstimateCount {
  return {
    estimates: a.estimates + b.estimates,
    unconverged: a.unconverged + b.unconverged,
    unrecorded: a.unrecorded + b.unrecorded,
  };
}

/**
 * Convergence of a run's estimated true values per block layer (the block and its heads),
 * from analysis.json's `converged` arrays (docs/math.md section 5 "True values": the network's
 * true value is exact and not counted).
 *
 * @returns the per-layer and total counts (all zero when nothing was estimated).
 * @example convergenceOf(run).total.unconverged // 0 when every estimate converged
 */
export function convergenceOf(run: RunData): RunConvergence {
  const zero: EstimateCount = { estimates: 0, unconverged: 0, unrecorded: 0 };
  const layers = layerOrder(Object.keys(run.analysis.layers))
    .filter((name) => name !== "network")
    .map((layer) => {
      const l = run.analysis.layers[layer];
      const heads = (l.heads ?? [])
        .map((h) => countEstimates(h.true, h.converged))
        .reduce(addCounts, zero);
      return { layer, block: countEstimates(l.true, l.converged), heads };
    });
  const c = run.analysis.convergence;
  return {
    layers,
    total: layers.map((l) => addCounts(l.block, l.heads)).reduce(addCounts, zero),
    method: c?.method ?? null,
    tolerance: c?.tolerance ?? null,
    maxIterations: c?.maxIterations ?? null,
  };
}
