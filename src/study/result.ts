import { existsSync } from "node:fs";
import { join } from "node:path";
import { mean } from "simple-statistics";
import { z } from "zod";
import { AttackFileSchema } from "../robustness/attackFile.ts";
import { TrainStateSchema } from "../train/checkpoint.ts";
import { InputError } from "../util/errors.ts";
import { readJsonFile, validated } from "./jsonFile.ts";
import type { StudyRun } from "./grid.ts";

/** A finished run's figures, in STUDY/runs/ID/result.json (written last: present = finished). */
export const RESULT_FILE = "result.json";

const nullableNumber = z.number().nullable();

/** One robust accuracy of a run: an attack at one eps of one norm. */
const RobustPoint = z.strictObject({
  norm: z.enum(["linf", "l2"]),
  attack: z.string(),
  eps: z.number(),
  /** Fraction of the attacked inputs still classified correctly, in [0, 1]. */
  accuracy: nullableNumber,
  /** Fraction of the attacked inputs whose loss gradient was exactly zero. */
  zeroGradient: nullableNumber,
});

/** result.json's schema. */
export const RunResultSchema = z.strictObject({
  format: z.literal("attnlip-study-run"),
  version: z.literal(1),
  id: z.string(),
  data: z.string(),
  model: z.string(),
  lambda: z.number(),
  jasminNorm: z.string(),
  reduce: z.string(),
  seed: z.number().int(),
  /** Test accuracy on the held-out test split (all of it unless the grid's train.testLimit) after the last epoch, in [0, 1]. */
  cleanAccuracy: z.number(),
  /** Held-out test examples behind cleanAccuracy. */
  testExamples: z.number().int(),
  /** Test inputs attacked (the first ones of the held-out test split) and their clean accuracy. */
  attacked: z.number().int(),
  attackedCleanAccuracy: z.number(),
  robust: z.array(RobustPoint),
  /** Test inputs analysed. */
  analyzed: z.number().int(),
  /** Median over the analysed inputs of the network's true local Lipschitz constant (exact spectral norm of the input Jacobian). */
  networkTrue: nullableNumber,
  /** Per block: the median of its true value (Lanczos estimate from below). */
  blockTrue: z.array(nullableNumber),
  /** Median of the composition floor (product of the block true values and the factors outside the blocks). */
  compositionFloor: nullableNumber,
  /** Per bound variant: median over the inputs of network bound / true value. */
  networkRatio: z.record(z.string(), nullableNumber),
  /** Per block, per bound variant: median of block bound / block true value. */
  blockRatio: z.array(z.record(z.string(), nullableNumber)),
  /** Mean sigma (exact softmax-Jacobian spectral norm) and mean p_(1) of the attention rows sampled by analyze. */
  meanSigma: nullableNumber,
  meanTop1: nullableNumber,
  /** Wall seconds: training (steps only), analysis, attacks. */
  seconds: z.strictObject({ train: z.number(), analyze: z.number(), attack: z.number() }),
});

/** A finished run's figures ({@link RunResultSchema}). */
export type RunResult = z.output<typeof RunResultSchema>;

/**
 * A run's result.json, or null when the run has not finished (no such file).
 *
 * @throws InputError when the file is not a run result (the message names it).
 */
export async function readRunResult(dir: string): Promise<RunResult | null> {
  const path = join(dir, RESULT_FILE);
  if (!existsSync(path)) return null;
  try {
    return validated(RunResultSchema, readJsonFile(path, "study: "), `study: ${path}`);
  } catch (e) {
    // result.json is written atomically: a broken one was damaged from outside; the run's files rebuild it.
    if (e instanceof InputError) throw new InputError(`${e.message}; remove it to rebuild the run's result from its files`);
    throw e;
  }
}

// A median of null: every value was Infinity (analysis.json writes it as null), e.g. the
// dot-product variants, vacuous on L2 attention; the study keeps it as "no value".
const SummaryStat = z.looseObject({ median: z.number().nullable() });
const LayerSummary = z.looseObject({
  true: SummaryStat.nullable(),
  ratios: z.record(z.string(), SummaryStat).nullable(),
});
/** The parts of analysis.json a study reads (analysis/files.ts writes them). */
const AnalysisPart = z.looseObject({
  inputs: z.number().int(),
  seconds: z.looseObject({ bounds: z.number(), truth: z.number() }),
  summary: z.record(z.string(), z.unknown()),
  attentionRows: z.looseObject({ sigma: z.array(z.number()), top1: z.array(z.number()) }),
});

const median = (s: { median: number | null } | null | undefined) => s?.median ?? null;
const ratioMedians = (l: z.output<typeof LayerSummary>) =>
  Object.fromEntries(Object.entries(l.ratios ?? {}).map(([v, s]) => [v, s.median]));

/**
 * Reads a run folder's train_state.json, analysis.json and attack-{linf,l2}.json and collects
 * the figures a study aggregates ({@link RunResult}).
 *
 * @throws InputError when a file is missing or not what the stage writes.
 */
export async function summarizeRunFolder(run: StudyRun, dir: string): Promise<RunResult> {
  const statePath = join(dir, "train_state.json");
  const state = validated(TrainStateSchema, readJsonFile(statePath, "study: "), `study: ${statePath}`);
  const last = state.history.at(-1);
  if (last === undefined || last.testAccuracy === null)
    throw new InputError(`study: ${statePath}: no completed epoch with a test accuracy`);
  const analysisPath = join(dir, "analysis.json");
  const analysis = validated(AnalysisPart, readJsonFile(analysisPath, "study: "), `study: ${analysisPath}`);
  const blockNames = Object.keys(analysis.summary)
    .filter((k) => /^block\.\d+$/.test(k))
    .sort((a, b) => Number(a.slice(6)) - Number(b.slice(6)));
  const blocks = blockNames.map((k) => validated(LayerSummary, analysis.summary[k], `study: ${analysisPath} summary.${k}`));
  const network = validated(LayerSummary, analysis.summary.network, `study: ${analysisPath} summary.network`);
  const floor = analysis.summary.compositionFloor as { floor?: { median?: number } } | null | undefined;
  const robust: RunResult["robust"] = [];
  let attacked = 0;
  let attackedClean = NaN;
  let attackSeconds = 0;
  for (const norm of ["linf", "l2"] as const) {
    const path = join(dir, `attack-${norm}.json`);
    const doc = validated(AttackFileSchema, readJsonFile(path, "study: "), `study: ${path}`);
    attacked = doc.n ?? 0;
    attackedClean = doc.cleanAccuracy ?? NaN;
    attackSeconds += doc.seconds ?? 0;
    // eps 0 repeats the clean accuracy of the attacked inputs (attackedCleanAccuracy).
    for (const r of doc.results.filter((x) => x.eps > 0))
      for (const [attack, accuracy] of Object.entries(r.robust))
        robust.push({ norm, attack, eps: r.eps, accuracy: accuracy ?? null, zeroGradient: r.zeroGradient?.[attack] ?? null });
  }
  const rows = analysis.attentionRows;
  const testExamples = state.data.testCount - (state.data.testLeftOut ?? 0);
  return {
    format: "attnlip-study-run",
    version: 1,
    id: run.id,
    data: run.data,
    model: run.model,
    lambda: run.lambda,
    jasminNorm: run.jasminNorm,
    reduce: run.reduce,
    seed: run.seed,
    cleanAccuracy: last.testAccuracy,
    testExamples,
    attacked,
    attackedCleanAccuracy: attackedClean,
    robust,
    analyzed: analysis.inputs,
    networkTrue: median(network.true),
    blockTrue: blocks.map((b) => median(b.true)),
    compositionFloor: floor?.floor?.median ?? null,
    networkRatio: ratioMedians(network),
    blockRatio: blocks.map(ratioMedians),
    meanSigma: rows.sigma.length > 0 ? mean(rows.sigma) : null,
    meanTop1: rows.top1.length > 0 ? mean(rows.top1) : null,
    seconds: { train: state.trainSeconds, analyze: analysis.seconds.bounds + analysis.seconds.truth, attack: attackSeconds },
  };
}
