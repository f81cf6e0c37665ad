import { tf, useBackend, type BackendName } from "../backend.ts";
import { batchTotals, type BatchTotals } from "../train/jasmin.ts";
import type { ModelBatch } from "../train/kinds/registry.ts";
import type { AdamW } from "../train/optimizer.ts";
import {
  applyGradients,
  batchGradients,
  type JasminSettings,
  type StepMetrics,
} from "../train/step.ts";
import type { Stepper, StepperFactory, StepSettings } from "../train/stepper.ts";
import { train, type TrainOptions, type TrainResult } from "../train/trainer.ts";
import { checkWorkers } from "./workerCount.ts";
import { WorkerPool } from "./pool.ts";
import {
  loadSharedWeights,
  shareModel,
  workerModel,
  writeSharedWeights,
  type SharedModel,
} from "./sharedModel.ts";
import type { TaskSpec } from "./tasks.ts";
import { contiguousSlices, sliceData, toTensor, type TensorData } from "./tensorData.ts";

/**
 * Data-parallel training: each step's batch is cut into contiguous slices, one per worker;
 * each worker computes its slice's share of the loss (train/step.ts batchGradients with the
 * whole batch's counts, so the shares add up to the batch's loss) and writes the gradient into
 * its slot of a SharedArrayBuffer. This thread sums the slots in slot order (float32, so a run
 * repeated with the same --workers is bit-identical), clips and applies AdamW to its own model
 * (which is what checkpoints save and evaluation reads), and writes the new weights into the
 * shared weight buffer that every worker loads before its next slice. Nothing but the slices'
 * inputs is copied between threads.
 */

/** What one worker computes: its slice of one step's batch. */
interface TrainStepPayload {
  /** The run's model; `buffer` holds the weights after `version` steps. */
  model: SharedModel;
  version: number;
  backend: BackendName;
  /** Images float32 [b, ...] or token ids int32 [b, n] of the slice. */
  x: TensorData;
  /** The slice's padding mask [b, n] (text), or null. */
  mask: TensorData | null;
  /** True classes of the slice, int32 [b]. */
  labels: Int32Array;
  /** Counts of the whole batch (JaSMin's and the cross-entropy's denominators). */
  totals: BatchTotals;
  jasmin: JasminSettings;
  /** Gradient slots: slot k holds floats [k * P, (k + 1) * P), P the parameter count, in model.variables() order. */
  gradients: SharedArrayBuffer;
  /** P, as this thread's model counts it (a worker's model must have as many). */
  parameters: number;
  slot: number;
}

// The weights version each worker thread has loaded into its model.
let loaded: { key: string; version: number } | null = null;

/** The worker side: one slice's gradient (into its slot) and its share of the step's figures. */
export const TRAIN_STEP_TASK: TaskSpec<TrainStepPayload, number[]> = {
  name: "trainStep",
  async run(task) {
    await useBackend(task.backend);
    const model = workerModel(task.model);
    if (loaded?.key !== task.model.key || loaded.version !== task.version) {
      loadSharedWeights(model, task.model);
      loaded = { key: task.model.key, version: task.version };
    }
    return tf.tidy(() => {
      const x = toTensor(task.x);
      const mask = task.mask === null ? null : toTensor(task.mask);
      const labels = tf.tensor1d(task.labels, "int32");
      // In micro-batches where the slice does not fit one pass (a BERT-base slice on wasm).
      const { grads, figures } = batchGradients(model, x, labels, {
        jasmin: task.jasmin,
        mask,
        totals: task.totals,
      });
      let offset = 0;
      const size = grads.reduce((a, g) => a + g.size, 0);
      if (size !== task.parameters)
        throw new Error(
          `trainStep: the worker's model has ${size} parameters, the run's ${task.parameters}`,
        );
      const slot = new Float32Array(task.gradients, task.slot * size * 4, size);
      for (const g of grads) {
        slot.set(g.dataSync() as Float32Array, offset);
        offset += g.size;
      }
      return figures;
    });
  },
};

/** What {@link TRAIN_READY_TASK} receives: the model and backend to set up, and a barrier. */
interface TrainReadyPayload {
  model: SharedModel;
  backend: BackendName;
  /** Int32 counter of the threads that are ready. */
  barrier: SharedArrayBuffer;
  /** Threads to wait for. */
  parties: number;
}

/**
 * The worker side of the warm-up before the first step: sets the backend and builds the
 * model, then waits (up to 60 s) until `parties` threads have, so that each of the pool's
 * threads takes one warm-up task and the first step's time is the step's alone. Past 60 s (far
 * more threads than cores) a thread stops waiting; a thread that took no warm-up task then
 * builds its model in its first step, which is only slower.
 */
export const TRAIN_READY_TASK: TaskSpec<TrainReadyPayload, boolean> = {
  name: "trainReady",
  async run(task) {
    await useBackend(task.backend);
    workerModel(task.model);
    loaded = { key: task.model.key, version: 0 };
    const counter = new Int32Array(task.barrier);
    Atomics.add(counter, 0, 1);
    Atomics.notify(counter, 0);
    const deadline = Date.now() + 60_000;
    for (
      let seen = Atomics.load(counter, 0);
      seen < task.parties && Date.now() < deadline;
      seen = Atomics.load(counter, 0)
    )
      Atomics.wait(counter, 0, seen, 1000);
    return Atomics.load(counter, 0) >= task.parties;
  },
};

/** Contiguous [start, size) slices of `count` rows over at most `workers` workers, none empty. */
export function batchSlices(count: number, workers: number): { start: number; size: number }[] {
  return contiguousSlices(count, Math.ceil(count / Math.min(workers, count)));
}

/**
 * A {@link StepperFactory} whose steps are computed by `workers` worker threads (see the module
 * comment). The run agrees with a single-thread run to float32 rounding (the sums are ordered
 * differently), and is bit-identical when repeated with the same worker count.
 *
 * @param options.workers worker threads, at most the batch size of the run (more would have
 *   no slice); >= 2 to be worth it (1 still runs one worker thread).
 * @param options.backend their tfjs backend ["wasm"].
 * @throws InputError on a bad worker count (when the factory is called).
 * @example await train({ data: "mnist", epochs: 1, out: "runs/a", stepper: workerStepper({ workers: 2 }) })
 */
export function workerStepper(options: { workers: number; backend?: BackendName }): StepperFactory {
  return async ({ model, optimizer, state }) => {
    // A step has at most batchSize slices: more threads would only be started and wait.
    const workers = Math.min(checkWorkers(options.workers, "train"), state.batchSize);
    const backend = options.backend ?? "wasm";
    const shared = shareModel(model);
    const variables = model.variables();
    const parameters = variables.reduce((a, v) => a + v.size, 0);
    const gradients = new SharedArrayBuffer(4 * workers * parameters);
    const pool = new WorkerPool(workers);
    const barrier = new SharedArrayBuffer(4);
    try {
      await Promise.all(
        Array.from({ length: workers }, () =>
          pool.run<boolean>("trainReady", {
            model: shared,
            backend,
            barrier,
            parties: workers,
          } satisfies TrainReadyPayload),
        ),
      );
    } catch (e) {
      await pool.close();
      throw e;
    }
    let version = 0;
    const stepper: Stepper = {
      workers,
      async step(batch: ModelBatch, settings: StepSettings): Promise<StepMetrics> {
        const { x, mask } = batchData(batch);
        const n = mask === null ? 0 : mask.shape[1];
        const totals = batchTotals(batch.size, n, mask === null ? null : mask.data);
        const slices = batchSlices(batch.size, workers);
        const shares = await Promise.all(
          slices.map(({ start, size }, slot) =>
            pool.run<number[]>("trainStep", {
              model: shared,
              version,
              backend,
              x: sliceData(x, start, size),
              mask: mask === null ? null : sliceData(mask, start, size),
              labels: batch.labels.slice(start, start + size),
              totals,
              jasmin: settings.jasmin,
              gradients,
              parameters,
              slot,
            } satisfies TrainStepPayload),
          ),
        );
        const sum = sumSlots(gradients, slices.length, variables);
        const figures = shares.reduce((a, f) => a.map((v, i) => v + f[i]), [0, 0, 0, 0, 0]);
        const metrics = applyStep(optimizer, sum, figures, settings);
        if (metrics.finite) {
          writeSharedWeights(shared, model);
          version++;
        }
        return metrics;
      },
      close: () => pool.close(),
    };
    return stepper;
  };
}

/** A batch's inputs read back once: x and its mask as {@link TensorData}. */
function batchData(batch: ModelBatch): { x: TensorData; mask: TensorData | null } {
  const read = (t: tf.Tensor): TensorData => ({
    data: t.dataSync() as Float32Array | Int32Array,
    shape: [...t.shape],
    dtype: t.dtype === "int32" ? "int32" : "float32",
  });
  let data: { x: TensorData; mask: TensorData | null } | null = null;
  // tidy frees the input tensors and whatever inputs() made on the way.
  tf.tidy(() => {
    const { x, mask } = batch.inputs();
    data = { x: read(x), mask: mask === undefined ? null : read(mask) };
  });
  return data!;
}

/**
 * The sum of the first `slots` gradient slots as one tensor per variable, added in slot order
 * by tfjs (float32 additions, each correctly rounded as the Float32Array loop this replaces
 * was, so the sum is bit for bit the same and the same on every run): a JavaScript loop over
 * BERT-base's 110 M entries took 1.6-2.2 s of a 26 s step on 2 workers.
 */
function sumSlots(buffer: SharedArrayBuffer, slots: number, variables: readonly tf.Variable[]): tf.Tensor[] {
  const parameters = variables.reduce((a, v) => a + v.size, 0);
  let offset = 0;
  return variables.map((v) => {
    const part = (k: number) => tf.tensor(new Float32Array(buffer, 4 * (k * parameters + offset), v.size), v.shape, "float32");
    let sum = part(0);
    for (let k = 1; k < slots; k++) {
      const next = part(k);
      const added = tf.add(sum, next);
      tf.dispose([sum, next]);
      sum = added;
    }
    offset += v.size;
    return sum;
  });
}

/** Clips and applies the summed gradient (one tensor per variable, in `variables` order; disposed here) to this thread's model. */
function applyStep(optimizer: AdamW, grads: tf.Tensor[], figures: number[], settings: StepSettings): StepMetrics {
  try {
    return applyGradients(optimizer, grads, figures, settings);
  } finally {
    tf.dispose(grads);
  }
}

/**
 * {@link train} with its steps computed by worker threads (workerStepper); workers 1 (or
 * undefined) is train itself, in this thread.
 *
 * @param options train's, plus workers [1] and their backend ["wasm"].
 * @throws what train throws; InputError on a bad worker count.
 * @example const r = await trainInWorkers({ data: "mnist", model: "vit-micro", epochs: 1, limit: 256, workers: 2 }); r.model.dispose();
 */
export async function trainInWorkers(
  options: TrainOptions & { workers?: number; backend?: BackendName },
): Promise<TrainResult> {
  const { workers: asked, backend, ...rest } = options;
  const workers = checkWorkers(asked ?? 1, "train");
  if (workers <= 1) return train(rest);
  return train({ ...rest, stepper: workerStepper({ workers, backend }) });
}
