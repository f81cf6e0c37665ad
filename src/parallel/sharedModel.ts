import type { ModelConfig } from "../nn/config.ts";
import { createModel, type Model } from "../nn/create.ts";

/**
 * A model as the workers receive it: its config and every parameter in one SharedArrayBuffer,
 * so that sending it with each task copies nothing (a SharedArrayBuffer is shared, not cloned,
 * by postMessage) and every worker reads the same bytes.
 */
export interface SharedModel {
  /** Identifies this model (and these weights) across tasks, so a worker builds it once. */
  key: string;
  config: ModelConfig;
  /** float32 values of every parameter, back to back, in `layout` order. */
  buffer: SharedArrayBuffer;
  /** Each parameter's name, offset (in floats) and shape. */
  layout: { name: string; offset: number; shape: number[] }[];
}

let nextKey = 0;

/**
 * Packs a model's parameters into one SharedArrayBuffer.
 *
 * @example const shared = shareModel(model); // send `shared` with each task
 */
export function shareModel(model: Model): SharedModel {
  const weights = model.getWeights();
  let total = 0;
  const layout: SharedModel["layout"] = [];
  for (const [name, w] of weights) {
    layout.push({ name, offset: total, shape: [...w.shape] });
    total += w.data.length;
  }
  const buffer = new SharedArrayBuffer(4 * total);
  const view = new Float32Array(buffer);
  for (const entry of layout) view.set(weights.get(entry.name)!.data, entry.offset);
  return { key: `${process.pid}-${nextKey++}-${Date.now()}`, config: model.config, buffer, layout };
}

/**
 * Writes a model's current parameters into its {@link SharedModel}'s buffer (after an optimizer
 * step), so that workers can load them ({@link loadSharedWeights}) without any copy being sent.
 *
 * @throws Error when the model's parameters do not match the layout.
 * @example optimizer.apply(grads, lr); writeSharedWeights(shared, model);
 */
export function writeSharedWeights(shared: SharedModel, model: Model): void {
  const view = new Float32Array(shared.buffer);
  // Straight from each variable's data into the buffer: getWeights() would copy every
  // parameter once more (440 MB of BERT-base: 2 s of a 26 s training step on 2 workers).
  const variables = new Map(model.params.entries());
  for (const entry of shared.layout) {
    const v = variables.get(entry.name);
    const size = entry.shape.reduce((a, b) => a * b, 1);
    if (v === undefined || v.size !== size)
      throw new Error(`writeSharedWeights: parameter "${entry.name}" does not match the shared layout`);
    view.set(v.dataSync() as Float32Array, entry.offset);
  }
}

/**
 * Loads the values in a {@link SharedModel}'s buffer into a model of the same config.
 *
 * @throws errors of setWeights on a layout that does not match.
 * @example loadSharedWeights(workerModel(task.model), task.model);
 */
export function loadSharedWeights(model: Model, shared: SharedModel): void {
  const view = new Float32Array(shared.buffer);
  model.setWeights(
    new Map(
      shared.layout.map((e) => {
        const size = e.shape.reduce((a, b) => a * b, 1);
        return [e.name, { data: view.subarray(e.offset, e.offset + size), shape: e.shape }];
      }),
    ),
  );
}

/**
 * The model a {@link SharedModel} describes, built in this thread (weights copied into its
 * tfjs variables). The caller owns and disposes it.
 *
 * @throws errors of createModel / setWeights on a config or layout that does not match.
 * @example const model = unshareModel(task.model);
 */
export function unshareModel(shared: SharedModel): Model {
  const model = createModel(shared.config, 0);
  const view = new Float32Array(shared.buffer);
  const weights = new Map(
    shared.layout.map((e) => {
      const size = e.shape.reduce((a, b) => a * b, 1);
      return [e.name, { data: view.slice(e.offset, e.offset + size), shape: e.shape }];
    }),
  );
  try {
    model.setWeights(weights);
  } catch (e) {
    model.dispose();
    throw e;
  }
  return model;
}

// One model per worker thread, rebuilt only when a task brings another one.
let cached: { key: string; model: Model } | null = null;

/**
 * In a worker: the model of a task, built once per {@link SharedModel.key} and kept for the
 * next task (the previous one is disposed when another model arrives). Do not dispose it.
 *
 * @example const model = workerModel(task.model);
 */
export function workerModel(shared: SharedModel): Model {
  if (cached?.key !== shared.key) {
    cached?.model.dispose();
    cached = null; // not left pointing at a disposed model if the next one fails to build
    cached = { key: shared.key, model: unshareModel(shared) };
  }
  return cached.model;
}
