import { tf } from "../backend.ts";
import type { Model } from "../nn/create.ts";
import { InputError } from "../util/errors.ts";

/**
 * How many examples a training step can put through one forward and backward pass on the wasm
 * backend, whose heap grows to at most 4 GB and then stops the process ("Aborted()", "memory
 * access out of bounds"). trainStep (step.ts) cuts a larger batch into micro-batches of this
 * size and adds up their gradients.
 *
 * Measured on BERT-base (110 M parameters, 128 tokens, JaSMin top2, wasm heap size at its
 * highest): one pass holds the gradients (440 MB) and about 46 MB per example and block of
 * activations and their gradients on the tape; beyond the tensors, the heap grows by about
 * another model's size (the allocator's fragmentation and the kernels' own buffers). The model
 * and AdamW's moments (1.3 GB) are what tf.memory() counts before the step. A batch of 8 in
 * micro-batches of 1 peaked at 3.5 GB of heap, of 2 at 3.98 GB (the limit is 4.0 GB).
 */

/** The most tfjs-backend-wasm's heap can grow to: 4 GiB less 64 KiB (its getHeapMax). */
export const WASM_HEAP_BYTES = 4294901760;

/** Share of the heap the estimate plans to fill (the estimate was up to 330 MB low when measured). */
const HEAP_SHARE = 0.85;

/** The model dimensions the estimate reads. */
export interface MemoryModelConfig {
  dModel: number;
  mlpHidden: number;
  heads: number;
  blocks: number;
}

/**
 * Estimated bytes one example adds to a training step's forward and backward pass: per block
 * and token, 12 d_model + 4 d_mlp values and 3 attention rows per head, at 16 bytes each (four
 * float32 copies: the forward value and the tape's, the gradient and a temporary). Calibrated
 * on BERT-base: 53 MB per example and block estimated, 46 MB measured.
 *
 * @param config the model's dModel, mlpHidden, heads and blocks.
 * @param tokens the sequence length (a ViT: patches + 1).
 * @returns bytes, > 0.
 * @throws RangeError when a dimension or tokens is not a positive integer.
 * @example trainingBytesPerExample({ dModel: 768, mlpHidden: 3072, heads: 12, blocks: 12 }, 128) // 642 MiB
 */
export function trainingBytesPerExample(config: MemoryModelConfig, tokens: number): number {
  for (const [name, v] of [
    ["dModel", config.dModel],
    ["mlpHidden", config.mlpHidden],
    ["heads", config.heads],
    ["blocks", config.blocks],
    ["tokens", tokens],
  ] as const)
    if (!Number.isInteger(v) || v < 1)
      throw new RangeError(`trainingBytesPerExample: ${name} must be a positive integer, got ${v}`);
  return (
    16 *
    tokens *
    config.blocks *
    (12 * config.dModel + 4 * config.mlpHidden + 3 * config.heads * tokens)
  );
}

/**
 * The examples per forward and backward pass that fit a heap of `heapBytes`: the whole batch
 * when its pass fits (live tensors + the gradients + one model's size of overhead + the
 * examples' {@link trainingBytesPerExample}, within 85% of the heap), else the largest
 * micro-batch whose pass fits beside the summed gradients (another model's size), at least 1.
 *
 * @param s.config, s.tokens the model's dimensions and sequence length.
 * @param s.batch examples in the step (>= 1).
 * @param s.parameters the model's parameter count (float32 each).
 * @param s.liveBytes bytes already held (model, optimizer moments, inputs: tf.memory().numBytes).
 * @param s.heapBytes the heap's limit [WASM_HEAP_BYTES].
 * @returns an integer in [1, batch].
 * @throws RangeError when batch or parameters is not a positive integer, or liveBytes or
 *   heapBytes is negative or not finite; as {@link trainingBytesPerExample}. InputError when
 *   one example cannot fit the heap (e.g. BERT-base at 512 tokens: about 3.4 GB beside 1.8 GB).
 * @example microBatchForMemory({ config: bertBase, tokens: 128, batch: 8, parameters: 109.5e6, liveBytes: 1.31e9 }) // 1
 */
export function microBatchForMemory(s: {
  config: MemoryModelConfig;
  tokens: number;
  batch: number;
  parameters: number;
  liveBytes: number;
  heapBytes?: number;
}): number {
  const heap = s.heapBytes ?? WASM_HEAP_BYTES;
  for (const [name, v] of [
    ["batch", s.batch],
    ["parameters", s.parameters],
  ] as const)
    if (!Number.isInteger(v) || v < 1)
      throw new RangeError(`microBatchForMemory: ${name} must be a positive integer, got ${v}`);
  for (const [name, v] of [
    ["liveBytes", s.liveBytes],
    ["heapBytes", heap],
  ] as const)
    if (!Number.isFinite(v) || v < 0)
      throw new RangeError(`microBatchForMemory: ${name} must be a finite number >= 0, got ${v}`);
  const perExample = trainingBytesPerExample(s.config, s.tokens);
  const model = 4 * s.parameters;
  const budget = HEAP_SHARE * heap - s.liveBytes;
  if (2 * model + s.batch * perExample <= budget) return s.batch;
  const fit = Math.floor((budget - 3 * model) / perExample);
  // Refused only when even the measured size (46 of the estimated 53 MB per example and block)
  // of one example exceeds the whole heap: the process would stop with "Aborted()".
  const free = heap - s.liveBytes - 3 * model;
  if (fit < 1 && MEASURED_OVER_ESTIMATED * perExample > free)
    throw new InputError(
      `train: one example of ${s.tokens} tokens needs about ${gigabytes(MEASURED_OVER_ESTIMATED * perExample)} GB in a training pass, and the wasm heap (at most ${gigabytes(heap)} GB) has ${gigabytes(Math.max(0, free))} GB beside the model, its optimizer state and gradients: train on shorter sequences (a smaller maxLength in the model's config) or a smaller model`,
    );
  return Math.min(s.batch, Math.max(1, fit));
}

/** The measured share of {@link trainingBytesPerExample}'s estimate (46 of 53 MB on BERT-base). */
const MEASURED_OVER_ESTIMATED = 46 / 53;

const gigabytes = (bytes: number) => (bytes / 1e9).toFixed(1);

/**
 * The default micro-batch of a training step ({@link microBatchForMemory}) for this model and
 * input on the current backend: on wasm, from the model's size and dimensions, x's tokens and
 * what tf.memory() holds now; on other backends (no 4 GB heap) the whole batch.
 *
 * @param x the step's input, batch first (token ids [b, n], or images).
 * @returns an integer in [1, b] (b when b is 0).
 * @example const micro = microBatchFor(model, x); // 1 for BERT-base at 128 tokens on wasm
 */
export function microBatchFor(model: Model, x: tf.Tensor): number {
  const batch = x.shape[0] as number;
  if (batch < 1 || tf.getBackend() !== "wasm") return batch;
  const c = model.config;
  const tokens = c.kind === "vit" ? (c.imageSize / c.patchSize) ** 2 + 1 : (x.shape[1] as number);
  const parameters = model.variables().reduce((a, v) => a + v.size, 0);
  return microBatchForMemory({
    config: c,
    tokens,
    batch,
    parameters,
    liveBytes: tf.memory().numBytes,
  });
}
