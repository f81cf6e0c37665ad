import { tf, useBackend, type BackendName } from "../backend.ts";
import { analyze, analyzeExamples, finishAnalysis, type Analysis, type AnalysisPart, type AnalyzeOptions } from "../analysis/analyze.ts";
import type { Model } from "../nn/create.ts";
import type { TransformerClassifier } from "../nn/model.ts";
import { WorkerPool } from "./pool.ts";
import { shareModel, unshareModel, type SharedModel } from "./sharedModel.ts";
import type { TaskSpec } from "./tasks.ts";

/**
 * Analysis in worker threads: the inputs are independent (each input's bounds and true values
 * depend on that input alone), so consecutive slices are analysed in parallel
 * ({@link analyzeExamples}) and joined in input order ({@link finishAnalysis}): the result is
 * the single-process one, value for value (only the timings differ; a test compares them).
 */

/** A tensor's values as structured clone carries them. */
interface TensorData {
  data: Float32Array | Int32Array;
  shape: number[];
  dtype: "float32" | "int32";
}

/** What one worker analyses. */
interface AnalyzeTaskPayload {
  model: SharedModel;
  backend: BackendName;
  inputs: TensorData;
  mask: TensorData | null;
  options: Omit<AnalyzeOptions, "mask" | "onProgress">;
}

// One model per worker, rebuilt only when a task brings another one.
let cached: { key: string; model: Model } | null = null;

function modelFor(shared: SharedModel): Model {
  if (cached?.key !== shared.key) {
    cached?.model.dispose();
    cached = { key: shared.key, model: unshareModel(shared) };
  }
  return cached.model;
}

/** The worker side: analyses one slice, keeping every attention row for the join. */
export const ANALYZE_TASK: TaskSpec<AnalyzeTaskPayload, AnalysisPart> = {
  name: "analyze",
  async run(task) {
    await useBackend(task.backend);
    const model = modelFor(task.model) as TransformerClassifier;
    const x = tf.tensor(task.inputs.data, task.inputs.shape, task.inputs.dtype);
    const mask = task.mask === null ? null : tf.tensor(task.mask.data, task.mask.shape, task.mask.dtype);
    try {
      return analyzeExamples(model, x, { ...task.options, mask });
    } finally {
      x.dispose();
      mask?.dispose();
    }
  },
};

/** Rows [start, start + size) of a tensor's values. */
function rows(values: Float32Array | Int32Array, shape: number[], start: number, size: number): TensorData["data"] {
  const per = shape.slice(1).reduce((a, b) => a * b, 1);
  return values.slice(start * per, (start + size) * per);
}

/** The fewest inputs a worker is given (fewer run in this thread). */
export const MIN_SLICE = 4;

/** Options of {@link analyzeInWorkers}: analyze's, the worker count and the backend each worker uses. */
export interface ParallelAnalyzeOptions extends AnalyzeOptions {
  /** Worker threads (1: analyze in this thread, no pool) [1]. */
  workers?: number;
  /** The tfjs backend of the workers ["wasm"]. */
  backend?: BackendName;
}

/**
 * {@link analyze} over worker threads: the inputs are cut into consecutive slices of at most
 * options.batchSize (16) and at least {@link MIN_SLICE} inputs, and no more slices than needed
 * to keep every worker busy;
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
  const workers = options.workers ?? 1;
  // Slices of at least MIN_SLICE inputs: starting a worker (tsx, tfjs, the model) costs seconds.
  const per = Math.min(options.batchSize ?? 16, Math.max(MIN_SLICE, Math.ceil(count / Math.max(1, workers))));
  const slices: { start: number; size: number }[] = [];
  for (let start = 0; start < count; start += per) slices.push({ start, size: Math.min(per, count - start) });
  if (workers <= 1 || slices.length <= 1) return analyze(model, inputs, options);
  const { workers: _w, backend, onProgress, mask, ...rest } = options;
  const shared = shareModel(model as unknown as Model);
  const values = (await inputs.data()) as Float32Array | Int32Array;
  const maskValues = mask ? ((await mask.data()) as Float32Array | Int32Array) : null;
  const dtype = inputs.dtype === "int32" ? "int32" : "float32";
  const pool = new WorkerPool(Math.min(workers, slices.length));
  let done = 0;
  try {
    const parts = await Promise.all(
      slices.map(async ({ start, size }) => {
        const payload: AnalyzeTaskPayload = {
          model: shared,
          backend: backend ?? "wasm",
          inputs: { data: rows(values, inputs.shape, start, size), shape: [size, ...inputs.shape.slice(1)], dtype },
          mask:
            maskValues === null || !mask
              ? null
              : { data: rows(maskValues, mask.shape, start, size), shape: [size, ...mask.shape.slice(1)], dtype: mask.dtype === "int32" ? "int32" : "float32" },
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
