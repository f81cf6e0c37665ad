import { useBackend, type BackendName, type tf } from "../backend.ts";
import type { TransformerClassifier } from "../nn/model.ts";
import { workerModel, type SharedModel } from "./sharedModel.ts";
import { toTensor, type TensorData } from "./tensorData.ts";

/** What every task on a model's inputs carries: the model, the backend, the inputs and their mask. */
export interface ModelInputsPayload {
  model: SharedModel;
  backend: BackendName;
  /** Images float32 [b, H, W, C] or token ids int32 [b, n]. */
  x: TensorData;
  /** The padding mask [b, n] of text; null for images. */
  mask: TensorData | null;
}

/**
 * In a worker: sets the task's backend, gets its model (built once per model: sharedModel.ts
 * workerModel), makes the inputs and mask tensors, runs `fn` on them and frees them.
 *
 * @throws what `fn` throws (the tensors are freed first).
 * @example await withModelInputs(task, (model, x, mask) => analyzeExamples(model, x, { mask }))
 */
export async function withModelInputs<R>(
  task: ModelInputsPayload,
  fn: (model: TransformerClassifier, x: tf.Tensor, mask: tf.Tensor | null) => R,
): Promise<R> {
  await useBackend(task.backend);
  const model = workerModel(task.model) as unknown as TransformerClassifier;
  const x = toTensor(task.x);
  const mask = task.mask === null ? null : toTensor(task.mask);
  try {
    return fn(model, x, mask);
  } finally {
    x.dispose();
    mask?.dispose();
  }
}
