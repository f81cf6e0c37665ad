import { enableWeightCache } from "../analysis/weightCacheStore.ts";
import { join } from "node:path";
import type { HeadVariant } from "../lipschitz/rules/attentionHead.ts";
import { useBackend, type BackendName } from "../backend.ts";
import type { ModelConfig } from "../nn/config.ts";
import type { TransformerClassifier } from "../nn/model.ts";
import { describeSplit } from "../data/evaluationInputs.ts";
import { evaluatedModel } from "./evaluatedModel.ts";
import type { EvaluationSplit } from "../data/heldOut.ts";
import { checkDataTask, modelInputs, type ModelInputs } from "../robustness/modelInputs/index.ts";
import { InputError } from "../util/errors.ts";
import { duration, stageProgress } from "../util/stageProgress.ts";
import { estimateForRun } from "../analysis/estimateRun.ts";
import { estimateLine } from "../analysis/estimate.ts";
import { defaultVariants } from "../lipschitz/rules/attentionHead.ts";
import type { Analysis } from "../analysis/analyze.ts";
import { analyzeInWorkers } from "../parallel/analyzeTask.ts";
import { defaultWorkers } from "../parallel/workerCount.ts";
import { analysisTables } from "../analysis/table.ts";
import { writeAnalysis } from "../analysis/files.ts";
import { firstInputOf } from "../analysis/firstInput.ts";
import type { TextTokenizer } from "../data/text/tokenizer.ts";
import { checkOutPath, refuseToReplace } from "../io/outPath.ts";
import { refuseInapplicableVariants } from "../lipschitz/applicableVariants.ts";

/** What `attnlip analyze` was asked to do. */
export interface AnalyzeRun {
  checkpoint?: string;
  model: string;
  seed: number;
  /**
   * Data spec (test split): images mnist | idx:DIR | cifar10:DIR, text spam | csv:FILE |
   * jsonl:FILE [a text checkpoint's own data; otherwise mnist].
   */
  data?: string;
  /** Text files: the text / label columns [the checkpoint's, else "text" / "label"]. */
  textColumn?: string;
  labelColumn?: string;
  /** Text files: the encoding [the checkpoint's, else auto]. */
  encoding?: string;
  n: number;
  /**
   * Folder for analysis.json and analysis.csv [the checkpoint folder, as `attack` writes
   * CHECKPOINT/attack.json; a random-init model without it writes nothing].
   */
  out?: string;
  /** Replace an existing analysis.json / analysis.csv (default: refuse). */
  force?: boolean;
  backend: BackendName;
  mlp: "local" | "relaxed";
  /** The bound variants to compute [all]. */
  variants?: readonly HeadVariant[];
  headTruth: boolean;
  blockTruth: boolean;
  iterations: number;
  /**
   * Worker threads for the analysis (parallel/analyzeTask.ts: slices of at least 4 inputs;
   * the results do not depend on it) [the number of cores].
   */
  workers?: number;
  /**
   * Print the per-layer tables, and on stderr the progress and the notes (fewer inputs than
   * asked, a costly exact MLP) (default true). false: the tables, the progress and the notes
   * are left out (the result and the files hold everything).
   */
  print?: boolean;
  /**
   * Print the estimated time before starting when the estimate is at least this many seconds
   * [60]; it costs one forward pass of the first input (src/analysis/estimate.ts).
   */
  estimateFrom?: number;
}

/** The analysis and the test split it was computed on. */
export type AnalyzeResult = Analysis & { split: EvaluationSplit };

/**
 * Loads the model and the test inputs, runs {@link analyze}, prints the tables and writes
 * analysis.json and analysis.csv to run.out, else into the checkpoint folder (a random-init
 * model without run.out: nothing written, and the last line says so). A checkpoint is
 * analysed on its own held-out test split (data/evaluationInputs.ts: its data, split seed and
 * sizes, digests checked; `seed` then only seeds the power iterations); a random-init model
 * on the test split by `seed`. Text models: the first n test texts encoded with the
 * checkpoint's tokenizer (a random-init model gets one built from the training split), padding
 * masks passed to the bounds and the true values (inputSpace "embedding").
 *
 * @returns the analysis and the split record (also written to analysis.json as `split`).
 * @throws InputError on an output folder that cannot be written (checked before the work
 *   starts), a bad preset, image data for a text model (or text data for a ViT),
 *   images that do not fit the model, unreadable text data / unknown labels, or a checkpoint
 *   whose held-out split cannot be rebuilt (data changed) or would include training examples;
 *   CheckpointError on a broken checkpoint.
 */
export async function runAnalyze(run: AnalyzeRun): Promise<AnalyzeResult> {
  await useBackend(run.backend);
  enableWeightCache(); // weight-only norms once per checkpoint (src/analysis/weightCacheStore.ts)
  const { model, source, tokenizer, trained, imported, labels } = await evaluatedModel("analyze", run.checkpoint, run.model, run.seed);
  try {
    // Before any work: an output folder that cannot be written is refused now, not after the analysis.
    const out = outFolder(run, imported);
    if (out !== undefined)
      checkOutPath(out, "folder", run.out !== undefined ? "--out" : "--out [the checkpoint folder]", "analyze");
    const kind = modelInputs(model.config.kind, "analyze");
    const data = run.data ?? trained?.spec ?? kind.defaultData;
    checkDataTask(kind, data, "analyze");
    if (run.variants !== undefined)
      refuseInapplicableVariants(model.config.attention, run.variants, "analyze: --variants");
    if (out !== undefined)
      refuseToReplace([join(out, "analysis.json"), join(out, "analysis.csv")], run.force === true, "analyze", "DIR");
    const request = { who: "analyze", data, trained, imported, seed: run.seed, n: run.n };
    const inputs = await kind
      .load(model, request, {
        tokenizer,
        labels,
        textColumn: run.textColumn,
        labelColumn: run.labelColumn,
        encoding: run.encoding,
      })
      .catch(asInputError);
    if (inputs.count < run.n && run.print !== false)
      console.error(`analyze: ${imported ? "the data has" : "the test split has"} ${inputs.count} ${imported ? "examples" : "held-out examples"}; using all of them (asked for ${run.n})`);
    const cost = exactMlpCost(model.config, inputs.x.shape[1] as number);
    if (run.mlp === "local" && cost > EXACT_MLP_WARNING_FLOPS && run.print !== false)
      console.error(
        `analyze: warning: --mlp local forms each token's MLP Jacobian exactly: about ${(cost / 1e9).toFixed(0)} GFLOP per input for this model (minutes to hours); --mlp relaxed takes seconds`,
      );
    console.log(`analyzing ${source} on ${inputs.count} ${kind.noun} (${run.backend} backend)`);
    console.log(`  data: ${describeSplit(inputs.info)}`);
    if (run.print !== false) printEstimate(model, inputs, run);
    return await analyzeAndWrite(model, run, source, inputs, imported, tokenizer);
  } finally {
    model.dispose();
  }
}

/** An analysis estimated to take at least this long gets an estimate line before it starts (seconds). */
const ESTIMATE_FROM_SECONDS = 60;

/**
 * Before a long analysis: its estimated time on stderr (src/analysis/estimate.ts says how it is
 * made), costing one forward pass of the first input. Shorter runs print nothing.
 */
function printEstimate(model: TransformerClassifier, inputs: ModelInputs, run: AnalyzeRun): void {
  const estimate = estimateForRun(model, inputs.x, inputs.mask, {
    variants: run.variants ?? defaultVariants(model.config.attention === "l2"),
    mlp: run.mlp,
    blockTruth: run.blockTruth,
    headTruth: run.headTruth,
    iterations: run.iterations,
    workers: run.workers ?? defaultWorkers(),
  });
  if (estimate.total >= (run.estimateFrom ?? ESTIMATE_FROM_SECONDS))
    console.error(`analyze: ${estimateLine(estimate, inputs.count, duration)}`);
}

/** Above this many floating-point operations per input, the exact MLP rules get a warning (about a minute in JavaScript). */
const EXACT_MLP_WARNING_FLOPS = 5e10;

/**
 * The floating-point operations of the exact MLP rules per input: per block and token, the
 * d x d Jacobian W_1 diag(act') W_2 (2 d^2 hidden) twice (the MLP's own value and the row-wise
 * run, docs/math.md section 3).
 *
 * @param n tokens (ViT: patches + 1; text: the padded length), or the image side for a ViT input.
 */
function exactMlpCost(config: ModelConfig, n: number): number {
  const tokens = config.kind === "vit" ? (config.imageSize / config.patchSize) ** 2 + 1 : n;
  return 2 * 2 * config.dModel * config.dModel * config.mlpHidden * tokens * config.blocks;
}

/**
 * Where analysis.json and analysis.csv go: --out, else the checkpoint folder, else nowhere. An
 * imported Hugging Face folder is someone else's (often a download cache): only --out writes.
 */
function outFolder(run: AnalyzeRun, imported: boolean): string | undefined {
  return run.out ?? (imported ? undefined : run.checkpoint);
}

/** Library InputErrors (data, held-out checks) become the CLI's one-line usage errors. */
function asInputError(e: unknown): never {
  if (e instanceof InputError) throw new InputError(e.message.startsWith("analyze:") ? e.message : `analyze: ${e.message}`);
  throw e;
}

/** The progress of a run with `print: false`: nothing on stderr. */
const QUIET_PROGRESS = { onProgress: () => {}, onStage: () => {}, end: () => {} };

/** Runs {@link analyze} on prepared inputs (disposed here), prints the tables, writes the files. */
async function analyzeAndWrite(
  model: TransformerClassifier,
  run: AnalyzeRun,
  source: string,
  inputs: ModelInputs,
  imported: boolean,
  tokenizer: TextTokenizer | null,
): Promise<AnalyzeResult> {
  const progress = run.print === false ? QUIET_PROGRESS : analysisProgress();
  const split = inputs.info;
  // The attention maps are of the first input: keep it for the report.
  const firstInput = firstInputOf(inputs.x, inputs.mask, tokenizer === null ? undefined : (ids) => tokenizer.decode(ids));
  let analysis: Analysis;
  try {
    analysis = await analyzeInWorkers(model, inputs.x, {
      workers: run.workers ?? defaultWorkers(),
      backend: run.backend,
      ...(inputs.mask === null ? {} : { mask: inputs.mask }),
      mlp: run.mlp,
      ...(run.variants === undefined ? {} : { variants: run.variants }),
      maxIterations: run.iterations,
      seed: run.seed,
      truth: { heads: run.headTruth, blocks: run.blockTruth },
      onProgress: progress.onProgress,
      onStage: progress.onStage,
    });
  } catch (e) {
    asInputError(e); // e.g. an L2 variant asked of dot-product attention: "analyze: --variants ..."
  } finally {
    inputs.dispose();
    progress.end();
  }
  if (run.print !== false) console.log(analysisTables(analysis));
  const took = `bounds took ${analysis.seconds.bounds.toFixed(1)} s, true values ${analysis.seconds.truth.toFixed(1)} s`;
  const out = outFolder(run, imported);
  if (out === undefined) console.log(`${took} (give --out DIR to write analysis.json and analysis.csv)`);
  else {
    console.log(took);
    const paths = await writeAnalysis(out, analysis, {
      model: model.config,
      source,
      data: split.spec,
      split,
      seed: run.seed,
      mlp: run.mlp,
      ...(firstInput !== null ? { firstInput } : {}),
    });
    console.log(`wrote ${paths.join(" and ")}`);
  }
  return { ...analysis, split };
}

/**
 * Progress of the analysis: over inputs, and within an input over its stages (bounds layer by
 * layer, the network's true value, the true values block by block), with the time left.
 */
function analysisProgress() {
  return stageProgress("analyze");
}
