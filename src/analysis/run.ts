import { tf, useBackend, type BackendName } from "../backend.ts";
import { createModel } from "../nn/create.ts";
import { modelPreset } from "../nn/config.ts";
import type { TransformerClassifier } from "../nn/model.ts";
import { loadDataset, takeFirst } from "../data/dataset.ts";
import { isTextDataSpec, loadTextEvalInputs } from "../data/text/dataset.ts";
import type { WordTokenizer } from "../data/text/tokenizer.ts";
import type { TrainState } from "../train/checkpoint.ts";
import { InputError } from "../softmax/parse.ts";
import { loadCheckpoint } from "../train/checkpoint.ts";
import { UsageError } from "../cli/errors.ts";
import { progressLine } from "../cli/progressLine.ts";
import { analyze, type Analysis } from "./analyze.ts";
import { analysisTables } from "./table.ts";
import { writeAnalysis } from "./files.ts";

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
  n: number;
  out?: string;
  backend: BackendName;
  mlp: "local" | "relaxed";
  headTruth: boolean;
  blockTruth: boolean;
  iterations: number;
  /** Print the per-layer tables (default true). */
  print?: boolean;
}

/**
 * Loads the model and the test inputs, runs {@link analyze}, prints the tables and writes the
 * files. Text models: the first n test texts encoded with the checkpoint's tokenizer (a
 * random-init model gets one built from the training split), padding masks passed to the
 * bounds and the true values (inputSpace "embedding").
 *
 * @returns the analysis.
 * @throws UsageError on a bad preset, image data for a text model (or text data for a ViT),
 *   images that do not fit the model, or unreadable text data / unknown labels;
 *   CheckpointError on a broken checkpoint.
 */
export async function runAnalyze(run: AnalyzeRun): Promise<Analysis> {
  await useBackend(run.backend);
  let model: TransformerClassifier;
  let source: string;
  let tokenizer: WordTokenizer | null = null;
  let trained: TrainState | null = null;
  if (run.checkpoint !== undefined) {
    const ckpt = await loadCheckpoint(run.checkpoint);
    model = ckpt.model as TransformerClassifier;
    tokenizer = ckpt.tokenizer;
    trained = ckpt.trainState;
    source = run.checkpoint;
  } else {
    let config;
    try {
      config = modelPreset(run.model);
    } catch (error) {
      throw new UsageError(`--model: ${(error as Error).message}`);
    }
    model = createModel(config, run.seed) as TransformerClassifier;
    source = `${run.model} (random init, seed ${run.seed})`;
  }
  try {
    if (model.config.kind === "text") return await analyzeText(model, run, source, tokenizer, trained);
    const spec = run.data ?? "mnist";
    if (isTextDataSpec(spec)) throw new UsageError(`--data: "${spec}" is text data; this model is a ViT`);
    const data = await loadDataset(spec, { seed: run.seed, testLimit: run.n });
    if (data.test.count === 0) throw new UsageError(`--data: the test split of ${data.spec} holds no examples`);
    const split = takeFirst(data.test, Math.min(run.n, data.test.count));
    const [h, w, c] = split.shape;
    if (h !== model.config.imageSize || w !== model.config.imageSize || c !== model.config.channels)
      throw new UsageError(
        `--data: images are ${h}x${w}x${c}, the model expects ${model.config.imageSize}x${model.config.imageSize}x${model.config.channels}`,
      );
    const inputs = tf.tensor4d(split.images, [split.count, h, w, c]);
    console.log(`analyzing ${source} on ${split.count} test inputs of ${data.spec} (${run.backend} backend)`);
    const progress = analysisProgress();
    const analysis = (() => {
      try {
        return analyze(model, inputs, {
          mlp: run.mlp,
          maxIterations: run.iterations,
          seed: run.seed,
          truth: { heads: run.headTruth, blocks: run.blockTruth },
          onProgress: progress.onProgress,
        });
      } finally {
        inputs.dispose();
        progress.end();
      }
    })();
    if (run.print !== false) console.log(analysisTables(analysis));
    console.log(
      `bounds took ${analysis.seconds.bounds.toFixed(1)} s, true values ${analysis.seconds.truth.toFixed(1)} s`,
    );
    if (run.out !== undefined) {
      const paths = await writeAnalysis(run.out, analysis, {
        model: model.config,
        source,
        data: data.spec,
        seed: run.seed,
        mlp: run.mlp,
      });
      console.log(`wrote ${paths.join(" and ")}`);
    }
    return analysis;
  } finally {
    model.dispose();
  }
}

/** The text path of {@link runAnalyze}; the caller disposes the model. */
async function analyzeText(
  model: TransformerClassifier,
  run: AnalyzeRun,
  source: string,
  tokenizer: WordTokenizer | null,
  trained: TrainState | null,
): Promise<Analysis> {
  if (model.config.kind !== "text") throw new Error("analyzeText: not a text model");
  const spec = run.data ?? trained?.data.spec ?? "spam";
  if (!isTextDataSpec(spec))
    throw new UsageError(`--data: a text model is analyzed on text data (spam, csv:FILE or jsonl:FILE), got "${spec}"`);
  const same = trained !== null && trained.data.spec === spec;
  let inputs;
  try {
    inputs = await loadTextEvalInputs(spec, {
      n: run.n,
      classes: model.config.classes,
      seed: trained?.seed ?? run.seed,
      tokenizer: tokenizer ?? undefined,
      vocabSize: model.config.vocabSize,
      maxLength: model.config.maxLength,
      labelNames: trained?.data.labels,
      textColumn: run.textColumn ?? (same ? (trained?.data.textColumn ?? undefined) : undefined),
      labelColumn: run.labelColumn ?? (same ? (trained?.data.labelColumn ?? undefined) : undefined),
    });
  } catch (e) {
    if (e instanceof InputError) throw new UsageError(`analyze: ${e.message}`);
    throw e;
  }
  console.log(
    `analyzing ${source} on ${inputs.split.count} test texts of ${inputs.spec} (token-embedding space, padding masked; ${run.backend} backend)`,
  );
  const progress = analysisProgress();
  let analysis: Analysis;
  try {
    analysis = analyze(model, inputs.ids, {
      mask: inputs.mask,
      mlp: run.mlp,
      maxIterations: run.iterations,
      seed: run.seed,
      truth: { heads: run.headTruth, blocks: run.blockTruth },
      onProgress: progress.onProgress,
    });
  } finally {
    tf.dispose([inputs.ids, inputs.mask]);
    progress.end();
  }
  if (run.print !== false) console.log(analysisTables(analysis));
  console.log(`bounds took ${analysis.seconds.bounds.toFixed(1)} s, true values ${analysis.seconds.truth.toFixed(1)} s`);
  if (run.out !== undefined) {
    const paths = await writeAnalysis(run.out, analysis, {
      model: model.config,
      source,
      data: inputs.spec,
      seed: run.seed,
      mlp: run.mlp,
    });
    console.log(`wrote ${paths.join(" and ")}`);
  }
  return analysis;
}

/** Progress of the analysis over inputs. */
function analysisProgress() {
  return progressLine("input", (done, total) => `  analyzed ${done}/${total} inputs`);
}
