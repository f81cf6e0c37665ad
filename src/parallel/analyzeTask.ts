import { type BackendName, type tf } from "../backend.ts";
import { analyze, analyzeExamples, finishAnalysis, withBlockTruths, type Analysis, type AnalysisPart, type AnalyzeOptions } from "../analysis/analyze.ts";
import { blockTruths, type BlockTruths } from "../analysis/blockTruths.ts";
import type { Model } from "../nn/create.ts";
import type { TransformerClassifier } from "../nn/model.ts";
import { checkWorkers } from "./workerCount.ts";
import { inOrder, WorkerPool } from "./pool.ts";
import { shareModel } from "./sharedModel.ts";
import type { TaskSpec } from "./tasks.ts";
import { contiguousSlices, sliceRows } from "./tensorData.ts";
import { withModelInputs, type ModelInputsPayload } from "./workerInputs.ts";

/**
 * Analysis in worker threads: the inputs are independent (each input's bounds and true values
 * depend on that input alone), so consecutive slices are analysed in parallel
 * ({@link analyzeExamples}) and joined in input order ({@link finishAnalysis}): the result is
 * the single-process one, value for value (only the timings differ; a test compares them).
 */

/** What one worker analyses. */
interface AnalyzeTaskPayload extends ModelInputsPayload {
  options: Omit<AnalyzeOptions, "mask" | "onProgress" | "onStage">;
}

/** The worker side: analyses one slice, keeping every attention row for the join. */
export const ANALYZE_TASK: TaskSpec<AnalyzeTaskPayload, AnalysisPart> = {
  name: "analyze",
  run: (task) => withModelInputs(task, (model, x, mask) => analyzeExamples(model, x, { ...task.options, mask })),
};

/** What one worker computes when one input (or a few) is split by block: some blocks' true values. */
interface BlockTruthTaskPayload extends ModelInputsPayload {
  blocks: number[];
  options: { maxIterations: number; tolerance: number; seed: number; batchSize: number; truth: { blocks: boolean; heads: boolean } };
}

/** The worker side of the split by block: the listed blocks' (and heads') true values at every input. */
export const BLOCK_TRUTH_TASK: TaskSpec<BlockTruthTaskPayload, BlockTruths> = {
  name: "block-truths",
  run: (task) => withModelInputs(task, (model, x, mask) => blockTruths(model, x, task.blocks, { ...task.options, mask })),
};

/** The fewest inputs a worker is given (fewer run in this thread). */
export const MIN_SLICE = 4;

/** Slices per worker that analyzeInWorkers aims for (at least MIN_SLICE inputs each). */
export const SLICES_PER_WORKER = 4;

/** Options of {@link analyzeInWorkers}: analyze's, the worker count and the backend each worker uses. */
export interface ParallelAnalyzeOptions extends AnalyzeOptions {
  /** Worker threads (1: analyze in this thread, no pool) [1]. */
  workers?: number;
  /** The tfjs backend of the workers ["wasm"]. */
  backend?: BackendName;
}

/**
 * {@link analyze} over worker threads: the inputs are cut into consecutive slices of at most
 * options.batchSize (16) and at least {@link MIN_SLICE} inputs, about
 * {@link SLICES_PER_WORKER} per worker (so that slow inputs even out);
 * each worker analyses whole slices; the parts are joined in input order. With workers 1 (or
 * a single slice) it is analyze itself, in this thread. options.onProgress is called as
 * slices finish.
 *
 * @param inputs as analyze: images float32 [N, H, W, C] or [N, H*W*C], or token ids int32 [N, n]
 *   with options.mask [N, n]; not disposed.
 * @returns what analyze returns for the same inputs and options (seconds: compute time summed
 *   over the workers).
 * @throws as analyze (an InputError in a worker is rethrown as one).
 * @example const a = await analyzeInWorkers(model, images, { workers: 2, truth: { heads: false } });
 */
export async function analyzeInWorkers(
  model: TransformerClassifier,
  inputs: tf.Tensor,
  options: ParallelAnalyzeOptions = {},
): Promise<Analysis> {
  const count = inputs.shape[0] ?? 0;
  const workers = checkWorkers(options.workers ?? 1, "analyzeInWorkers");
  // Slices of at least MIN_SLICE inputs (starting a worker costs seconds), and about
  // SLICES_PER_WORKER per worker: the true values of some inputs take many more power
  // iterations than others, and smaller slices let the pool even that out (a worker's memory
  // also grows with its slice).
  const per = Math.min(options.batchSize ?? 16, Math.max(MIN_SLICE, Math.ceil(count / (workers * SLICES_PER_WORKER))));
  const slices = contiguousSlices(count, per);
  const truth = { network: true, blocks: true, heads: true, ...options.truth };
  if (workers > 1 && slices.length <= 1 && (truth.blocks || truth.heads) && model.config.blocks > 1)
    return analyzeByBlock(model, inputs, workers, options);
  if (workers <= 1 || slices.length <= 1) return analyze(model, inputs, options);
  // onStage stays here: a worker's stages are not reported (its slices are counted by onProgress).
  const { workers: _w, backend, onProgress, onStage: _s, mask, ...rest } = options;
  const shared = shareModel(model as unknown as Model);
  const values = (await inputs.data()) as Float32Array | Int32Array;
  const maskValues = mask ? ((await mask.data()) as Float32Array | Int32Array) : null;
  const pool = new WorkerPool(Math.min(workers, slices.length));
  let done = 0;
  try {
    const parts = await inOrder(
      slices.map(async ({ start, size }) => {
        const payload: AnalyzeTaskPayload = {
          model: shared,
          backend: backend ?? "wasm",
          x: sliceRows(values, inputs, start, size),
          mask: maskValues === null || !mask ? null : sliceRows(maskValues, mask, start, size),
          options: { ...rest, maxAttentionRows: Infinity, inputOffset: start },
        };
        const part = await pool.run<AnalysisPart>("analyze", payload);
        done += size;
        onProgress?.(done, count);
        return part;
      }),
    );
    return finishAnalysis(parts, options);
  } finally {
    await pool.close();
  }
}

/**
 * Too few inputs to give every worker a slice (one input of a BERT-base is the usual case): the
 * work of those inputs is split by block instead. One worker computes the bounds and the
 * network's true value with the block and head true values left out; the others (and that one,
 * once done) compute the true values of groups of blocks, each over its own forward pass of the
 * same batches (src/analysis/blockTruths.ts); the two are joined by withBlockTruths. The values
 * are those of {@link analyze} in one thread, bit for bit (a test compares them).
 */
async function analyzeByBlock(model: TransformerClassifier, inputs: tf.Tensor, workers: number, options: ParallelAnalyzeOptions): Promise<Analysis> {
  const { workers: _w, backend, onProgress, onStage, mask, ...rest } = options;
  const count = inputs.shape[0] ?? 0;
  const truth = { network: true, blocks: true, heads: true, ...options.truth };
  const blocks = model.config.blocks;
  // Groups of contiguous blocks, two per worker: each group pays one forward pass, and smaller
  // groups even out a slow block.
  const groups = Math.min(blocks, 2 * workers);
  const shared = shareModel(model as unknown as Model);
  const base = {
    model: shared,
    backend: backend ?? "wasm",
    x: sliceRows((await inputs.data()) as Float32Array | Int32Array, inputs, 0, count),
    mask: mask ? sliceRows((await mask.data()) as Float32Array | Int32Array, mask, 0, count) : null,
  };
  const pool = new WorkerPool(workers);
  const started = performance.now();
  let blocksDone = 0;
  try {
    const boundsPart = pool.run<AnalysisPart>("analyze", {
      ...base,
      options: { ...rest, truth: { ...truth, blocks: false, heads: false }, maxAttentionRows: Infinity, inputOffset: 0 },
    } satisfies AnalyzeTaskPayload);
    const truthParts = Array.from({ length: groups }, (_, g) => {
      const from = Math.floor((g * blocks) / groups);
      const to = Math.floor(((g + 1) * blocks) / groups);
      const list = Array.from({ length: to - from }, (_, k) => from + k);
      return pool
        .run<BlockTruths>("block-truths", {
          ...base,
          blocks: list,
          options: {
            maxIterations: options.maxIterations ?? 1000,
            tolerance: options.tolerance ?? 1e-6,
            seed: options.seed ?? 0,
            batchSize: options.batchSize ?? 16,
            truth: { blocks: truth.blocks, heads: truth.heads },
          },
        } satisfies BlockTruthTaskPayload)
        .then((r) => {
          blocksDone += list.length;
          onStage?.({ stage: "true values", input: count, inputs: count, done: blocksDone, total: blocks, unit: "block", name: `blocks ${from}-${to - 1} (in worker threads)`, seconds: (performance.now() - started) / 1000 });
          return r;
        });
    });
    const [part, ...truths] = await inOrder<AnalysisPart | BlockTruths>([boundsPart, ...truthParts]);
    onProgress?.(count, count);
    return finishAnalysis([withBlockTruths(part as AnalysisPart, truths as BlockTruths[])], options);
  } finally {
    await pool.close();
  }
}
