import type { tf } from "../../backend.ts";
import type { ImageDataset, SeededRng } from "../../data/dataset.ts";
import { specTask, type DataTask } from "../../data/registry.ts";
import type { TextDataset } from "../../data/text/dataset.ts";
import type { TextTokenizer } from "../../data/text/tokenizer.ts";
import type { ModelConfig, ModelConfigInput } from "../../nn/config.ts";
import type { TrainState } from "../checkpoint.ts";

/**
 * What a kind of training data is to the training loop, said once so that the loop (setup.ts,
 * epoch.ts) has one path for images and text: how a fresh run loads it and picks the model
 * config that fits it, how a resumed run reloads it, what train_state.json records about it,
 * how its examples are batched into model inputs, and the throughput unit. One record per data
 * task (image.ts, text.ts), registered by task ({@link registerTrainingKind}); a new task is
 * one file plus one registration.
 */

/** A loaded data set of any kind. */
export type AnyDataset = ImageDataset | TextDataset;
/** One split of any kind. */
export type AnySplit = AnyDataset["train"] | AnyDataset["test"];

/** One batch as the training step and the evaluation read it. */
export interface ModelBatch {
  /** Examples in the batch. */
  size: number;
  /** True classes, int32 [size]. */
  labels: Int32Array;
  /**
   * The model's input as new tensors (call inside tf.tidy): images float32 [size, pixels], or
   * token ids int32 [size, n] with the padding mask [size, n] (1 = real token).
   */
  inputs(): { x: tf.Tensor; mask?: tf.Tensor };
}

/** Training-time augmentation (train_state.json `augment`). */
export interface AugmentSettings {
  /** Largest shift of a training image in pixels, each direction (0 = none). */
  shift: number;
}

/** How a fresh run reads its data (the subset of the training options a kind needs). */
export interface FreshDataOptions {
  seed: number;
  /** Model preset or config (default: the kind's {@link TrainingKind.defaultModel}). */
  model?: string | ModelConfigInput;
  limit?: number;
  testLimit?: number;
  textColumn?: string;
  labelColumn?: string;
  encoding?: string;
  /**
   * A model imported from Hugging Face to fine-tune: its config is kept (the data must fit it:
   * its image size and channels, at most its classes) and, for text, its tokenizer reads the data.
   */
  pretrained?: { config: ModelConfig; tokenizer: TextTokenizer | null; labels: readonly string[] | null };
}

/** One kind of training data (see the module comment). */
export interface TrainingKind {
  /** The data task ("image", "text"). */
  task: DataTask;
  /** The model config kind that trains on it ("vit", "text"). */
  modelKind: string;
  /** The model preset when none is given ("vit-tiny", "text-tiny"). */
  defaultModel: string;
  /** Throughput unit in progress and epoch lines ("img/s", "examples/s"). */
  rateUnit: string;
  /** Whether a loaded data set is of this kind. */
  owns(dataset: AnyDataset): boolean;
  /**
   * A fresh run's data (loaded from `spec`, or `given` when already loaded) and the model
   * config that fits it.
   *
   * @throws InputError on unreadable data or a model that does not fit it.
   */
  loadFresh(spec: string, options: FreshDataOptions, given?: AnyDataset): Promise<{ dataset: AnyDataset; config: ModelConfig }>;
  /**
   * A checkpoint's data, read as it was at training (its seed, limits and reading options; the
   * checkpoint's tokenizer for text).
   *
   * @throws InputError on unreadable data.
   */
  reload(state: TrainState, tokenizer: TextTokenizer | null): Promise<AnyDataset>;
  /** What train_state.json records about the data beyond spec, sizes and digests. */
  stateData(dataset: AnyDataset): Partial<TrainState["data"]>;
  /** The examples of a split at the given positions, in order (a copy). */
  select(split: AnySplit, positions: readonly number[]): AnySplit;
  /** Batches of `batchSize` examples of a split in `order` (null: split order), the last one smaller. */
  batches(split: AnySplit, order: Int32Array | null, batchSize: number): Iterable<ModelBatch>;
  /**
   * Training-time augmentation of one batch (images: random shifts, kinds/shift.ts); absent
   * when the kind has none. Draws from `rng` when called, so that a run is repeatable and a
   * resume (which restores the generator at the epoch boundary) continues it exactly.
   */
  augment?(batch: ModelBatch, settings: AugmentSettings, rng: SeededRng, dataset: AnyDataset): ModelBatch;
  /** The tokenizer to save with a checkpoint (null for images). */
  tokenizer(dataset: AnyDataset): TextTokenizer | null;
  /**
   * What a new run says about its data before training (text files: the classes with their
   * counts, and warnings about rare classes).
   */
  describe(dataset: AnyDataset): { lines: string[]; warnings: string[] };
}

const KINDS = new Map<DataTask, TrainingKind>();

/**
 * Registers the training kind of a data task.
 *
 * @throws Error when the task already has one.
 * @example registerTrainingKind(IMAGE_TRAINING)
 */
export function registerTrainingKind(kind: TrainingKind): TrainingKind {
  if (KINDS.has(kind.task)) throw new Error(`registerTrainingKind: task "${kind.task}" already has a training kind`);
  KINDS.set(kind.task, kind);
  return kind;
}

/**
 * The training kind of a data task.
 *
 * @throws Error when none is registered (a data source of a task nothing can train on).
 * @example trainingKind("text").defaultModel // "text-tiny"
 */
export function trainingKind(task: DataTask): TrainingKind {
  const kind = KINDS.get(task);
  if (kind === undefined) throw new Error(`trainingKind: no training kind is registered for ${task} data`);
  return kind;
}

/**
 * The training kind of a loaded data set.
 *
 * @throws Error when no registered kind owns it.
 * @example kindOfDataset(await loadDataset("mnist")).task // "image"
 */
export function kindOfDataset(dataset: AnyDataset): TrainingKind {
  for (const kind of KINDS.values()) if (kind.owns(dataset)) return kind;
  throw new Error(`kindOfDataset: no training kind owns the data set ${dataset.spec}`);
}

/**
 * The training kind of a data spec (unknown specs: images, whose loader names the accepted
 * forms).
 *
 * @throws Error when the spec's task has no training kind registered.
 * @example kindOfSpec("csv:mail.csv").task // "text"
 */
export function kindOfSpec(spec: string): TrainingKind {
  return trainingKind(specTask(spec) ?? "image");
}

/**
 * The training kind whose models are of this config's kind ("vit" trains on images, "text" on
 * text).
 *
 * @throws Error when no registered kind trains this kind of model.
 * @example kindOfModel(modelPreset("text-tiny")).task // "text"
 */
export function kindOfModel(config: Pick<ModelConfig, "kind">): TrainingKind {
  for (const kind of KINDS.values()) if (kind.modelKind === config.kind) return kind;
  throw new Error(`kindOfModel: no training kind is registered for a "${config.kind}" model`);
}
