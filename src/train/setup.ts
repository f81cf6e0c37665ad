import { existsSync, readFileSync, renameSync, statSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join, resolve } from "node:path";
import { createHash } from "node:crypto";
import { batchCount, SeededRng, type ImageDataset } from "../data/dataset.ts";
import { fingerprintDigest, fingerprintInput, fingerprintSet, heldOutPositions } from "../data/fingerprints.ts";
import { changedDataError, checkRebuiltSplit, splitDigests } from "../data/heldOut.ts";
import { dataPath } from "../data/identity.ts";
import type { TextDataset } from "../data/text/dataset.ts";
import { writeFileAtomically } from "../io/atomicWrite.ts";
import type { ModelConfigInput } from "../nn/config.ts";
import { createModel, type Model } from "../nn/create.ts";
import type { TextTokenizer } from "../data/text/tokenizer.ts";
import { HF_EXPORT_FOLDER } from "../hf/export.ts";
import { isHfFolder, loadHfModel, type HfModel } from "../hf/load.ts";
import { hfTextTokenizer } from "../hf/textTokenizer.ts";
import { InputError } from "../util/errors.ts";
import {
  CheckpointError,
  CHECKPOINT_FILES,
  isCheckpointFolder,
  readSavedTrainState,
  loadCheckpoint,
  loadOptimizerState,
  type TrainingInputs,
  type TrainState,
} from "./checkpoint.ts";
import { JASMIN_MAX_LAMBDA, selectLayers } from "./jasmin.ts";
import { kindOfDataset, kindOfModel, kindOfSpec, type AnyDataset, type TrainingKind } from "./kinds/index.ts";
import { AdamW } from "./optimizer.ts";
import type { JasminSettings } from "./step.ts";
import type { ProgressMode } from "./progress.ts";
import type { StepperFactory } from "./stepper.ts";

/**
 * The state a training run is built from: a fresh start ({@link freshRun}) and a resume
 * ({@link restoreRun}) differ only in how it is built; the epoch loop (epoch.ts) is the same.
 */

/** Options of {@link train}. Defaults in brackets. */
export interface TrainOptions {
  /**
   * Data spec: images "mnist" | "idx:DIR" | "cifar10:DIR", text "spam" | "csv:FILE" |
   * "jsonl:FILE" ["mnist"]; ignored when resuming.
   */
  data?: string;
  /** Text files: the column / key holding the text ["text"]. */
  textColumn?: string;
  /** Text files: the column / key holding the label ["label"]; labels become class ids in sorted order. */
  labelColumn?: string;
  /** Text files: the character encoding ["auto": UTF-16 after its byte-order mark, else UTF-8, else Windows-1252]; recorded in the checkpoint. */
  encoding?: string;
  /** A data set already loaded (tests, notebooks); its spec is recorded. Overrides `data`. */
  dataset?: ImageDataset | TextDataset;
  /**
   * Model preset name or config ["vit-tiny" for images, "text-tiny" for text]. A ViT preset's
   * imageSize, channels and classes are taken from the data; a text preset's classes.
   */
  model?: string | ModelConfigInput;
  /** Total epochs [3]; when resuming, a different value extends / shortens the run (the schedule is recomputed). */
  epochs?: number;
  /** Examples per step [32]. */
  batchSize?: number;
  /** Peak learning rate [2e-3]; batch 32 and 2e-3 reach 93% on MNIST in 3 epochs, 64 and 1e-3 only 88.5%. */
  lr?: number;
  /** Final learning rate of the cosine decay [0]. */
  minLr?: number;
  /** Decoupled weight decay on the matrices of linear maps (parameters of role "weight", src/nn/params.ts) [0.05]. */
  weightDecay?: number;
  /** Linear warm-up steps [10% of the total steps]. */
  warmupSteps?: number;
  /** Gradient clipping: max global l2 norm; 0 = off [1]. */
  clip?: number;
  /**
   * Image data: shift each training image by a random whole number of pixels, at most this
   * many each way, a new draw per example and epoch (train/kinds/shift.ts) [0: off].
   */
  augmentShift?: number;
  /** JaSMin [lambda 0, norm top2, reduce max-log, all layers]. */
  jasmin?: Partial<JasminSettings>;
  /** Seed of the model initialisation, the shuffling and the embedded-MNIST split [0]. */
  seed?: number;
  /** Checkpoint and metrics folder; null/undefined = none (nothing written). */
  out?: string | null;
  /** Keep the first `limit` training examples. */
  limit?: number;
  /** Keep the first `testLimit` test examples. */
  testLimit?: number;
  /** Continue the checkpoint in this folder (it is also the output folder). */
  resume?: string;
  /**
   * Start a new run from the weights of the attnlip checkpoint in this folder, on its data and
   * split ({@link initRun}); data, model, seed and the limits are then the base's.
   */
  init?: string;
  /** Stop (as if interrupted) once this many epochs are complete (tests). */
  stopAfterEpoch?: number;
  /** Progress display ["auto"]. */
  progress?: ProgressMode;
  /** Where progress and epoch lines (and a text file's classes) go [console.log]. */
  log?: (line: string) => void;
  /** Where warnings go, one line each (a text file's class with very few examples) [console.error]. */
  warn?: (line: string) => void;
  /** Examples per evaluation forward pass [250]. */
  evalBatchSize?: number;
  /**
   * Who computes the optimizer steps [stepper.ts localStepper: this thread];
   * parallel/trainTask.ts trainInWorkers passes worker threads.
   */
  stepper?: StepperFactory;
}

/** Everything an epoch loop needs: model, optimizer, data, the train state and where to write. */
export interface TrainingRun {
  model: Model;
  optimizer: AdamW;
  /**
   * The data; its test split holds only held-out inputs: test examples whose input equals a
   * training input (a duplicate in the corpus) are left out ({@link heldOutTest}).
   */
  dataset: AnyDataset;
  /** How this kind of data is batched and saved (kinds/). */
  kind: TrainingKind;
  /** The training inputs' fingerprints (saved with each checkpoint as fingerprints.json). */
  trainingInputs: TrainingInputs;
  /** Test examples left out because their input equals a training input. */
  testLeftOut: number;
  /** The content of train_state.json, advanced by each epoch. */
  state: TrainState;
  /** Output folder (absolute), or null. */
  out: string | null;
  /** A fine-tuned Hugging Face model's config.json (saved with each checkpoint; null otherwise). */
  hfConfig: Record<string, unknown> | null;
}

function positiveInt(name: string, v: number | undefined, fallback: number): number {
  const value = v ?? fallback;
  if (!Number.isSafeInteger(value) || value < 1)
    throw new InputError(`${name}: must be a positive integer, got ${value}`);
  return value;
}

function nonNegative(name: string, v: number | undefined, fallback: number): number {
  const value = v ?? fallback;
  if (!Number.isFinite(value) || value < 0)
    throw new InputError(`${name}: must be a finite number >= 0, got ${value}`);
  return value;
}

/**
 * What identifies the data a run reads, for train_state.json: its content digest and the
 * absolute path of its file or folder (data/identity.ts); each absent when unknown.
 */
function dataIdentity(dataset: ImageDataset | TextDataset): { contentDigest?: string; path?: string } {
  const path = dataPath(dataset.spec);
  return {
    ...(typeof dataset.contentDigest === "string" ? { contentDigest: dataset.contentDigest } : {}),
    ...(path !== null ? { path } : {}),
  };
}

/**
 * The data with its test split reduced to held-out inputs: a test example whose model input
 * equals a training input (data/fingerprints.ts; e.g. the same message twice in a corpus) is
 * left out of the test accuracy, as every evaluation leaves it out (data/evaluationInputs.ts).
 * The split's recorded sizes and digests stay those of the full split.
 */
function heldOutTest(
  kind: TrainingKind,
  dataset: AnyDataset,
): { dataset: AnyDataset; trainingInputs: TrainingInputs; testLeftOut: number } {
  const fingerprints = fingerprintSet(dataset.train);
  const { kept, seen } = heldOutPositions(dataset.test, fingerprints);
  const trainingInputs = { input: fingerprintInput(dataset.train), fingerprints };
  if (seen.length === 0) return { dataset, trainingInputs, testLeftOut: 0 };
  return { dataset: { ...dataset, test: kind.select(dataset.test, kept) } as AnyDataset, trainingInputs, testLeftOut: seen.length };
}

/** Records in the train state how many test examples were left out, and the training inputs' fingerprint count and digest. */
function recordHeldOut(state: TrainState, held: { trainingInputs: TrainingInputs; testLeftOut: number }): void {
  state.data.testLeftOut = held.testLeftOut;
  const { fingerprints } = held.trainingInputs;
  state.data.fingerprints = { count: fingerprints.size, digest: fingerprintDigest(fingerprints) };
}

/**
 * A metrics.jsonl with records, in a folder without a checkpoint, is an earlier run's log (one
 * that diverged or stopped before its first epoch ended): it is kept as metrics.N.jsonl (the
 * first free N), with a warning, instead of being replaced by the new run's.
 */
function keepEarlierMetrics(out: string, warn: (line: string) => void): void {
  const path = join(out, "metrics.jsonl");
  if (!existsSync(path) || statSync(path).size === 0) return;
  let n = 1;
  while (existsSync(join(out, `metrics.${n}.jsonl`))) n++;
  renameSync(path, join(out, `metrics.${n}.jsonl`));
  warn(`train: warning: ${out} held an earlier run's metrics.jsonl without a checkpoint (it stopped before its first epoch ended): kept as metrics.${n}.jsonl`);
}

/**
 * A new run: settings validated, data loaded (the tokenizer built from the training split for
 * text), the model initialised with `seed`, a fresh AdamW, the train state with the split's
 * digests (data/heldOut.ts) and the data's content digest and path (data/identity.ts), and an
 * empty metrics.jsonl in `out`.
 *
 * @throws InputError on a bad setting, unreadable data, a model that does not fit the data, or
 *   `out` already holding a checkpoint.
 * @example const run = await freshRun({ data: "mnist", model: "vit-micro", limit: 256, epochs: 1 });
 */
export async function freshRun(options: TrainOptions): Promise<TrainingRun> {
  const seed = options.seed ?? 0;
  if (!Number.isSafeInteger(seed)) throw new InputError(`seed: must be an integer, got ${seed}`);
  const settings = newRunSettings(options);
  if (options.limit !== undefined) positiveInt("limit", options.limit, 1);
  if (options.testLimit !== undefined) positiveInt("test-limit", options.testLimit, 1);
  const out = newRunFolder(options);
  const spec = options.data ?? "mnist";
  const kind = options.dataset !== undefined ? kindOfDataset(options.dataset) : kindOfSpec(spec);
  refuseAugment(settings, kind, spec);
  const hf = typeof options.model === "string" && (await isHfFolder(options.model)) ? await importForTraining(options.model) : null;
  let loaded;
  try {
    loaded = await kind.loadFresh(
      spec,
      {
        seed,
        model: options.model,
        limit: options.limit,
        testLimit: options.testLimit,
        textColumn: options.textColumn,
        labelColumn: options.labelColumn,
        encoding: options.encoding,
        pretrained: hf === null ? undefined : { config: hf.config, tokenizer: hf.tokenizer, labels: hf.labels },
      },
      options.dataset,
    );
  } catch (e) {
    hf?.model.dispose();
    throw e;
  }
  const { dataset, config } = loaded;
  refuseLargeShift(settings, dataset);
  if (dataset.train.count === 0)
    throw new InputError(`data: ${dataset.spec} has no training examples; nothing to train on`);
  const data: TrainState["data"] = {
    spec: dataset.spec,
    limit: options.limit ?? null,
    testLimit: options.testLimit ?? null,
    trainCount: dataset.train.count,
    testCount: dataset.test.count,
    ...splitDigests(dataset.train.indices, dataset.test.indices),
    ...dataIdentity(dataset),
    ...kind.stateData(dataset),
  };
  const state = newTrainState(options, settings, seed, data, config.blocks);
  if (hf !== null) {
    state.pretrained = { source: "huggingface", path: resolve(options.model as string), architecture: hf.architecture };
    if (out !== null) checkHfExportFolder(out);
    if (hf.addedHead)
      (options.warn ?? console.error)(`train: warning: ${hf.architecture} has no classifier: attnlip added a linear head on its pooled output (random, seed 0), which this run trains`);
  }
  const model = hf?.model ?? createModel(config, seed);
  return startRun(options, { model, state, out, kind, dataset, hfConfig: hf?.hfConfig ?? null, weightDecay: settings.weightDecay });
}

/**
 * A new run that starts from the weights of another attnlip checkpoint (`train --init BASE`):
 * the base's model, and its data exactly (spec, seed, limits, columns, encoding, the same split,
 * checked by digests as a resume checks them; the base's tokenizer for text), so that the test
 * split stays held out from everything the weights have seen. Everything else is new: a fresh
 * AdamW, the schedule of `options.epochs` (warm-up and cosine decay from `options.lr`), the
 * JaSMin settings, the shuffling stream restarted from the seed, and an empty history.
 * train_state.json records the base (path, epoch, step, SHA-256 of its weights) as
 * `pretrained`. This is how a study fine-tunes one trained model per seed with each lambda.
 *
 * @throws InputError when `out` is the base, already holds a checkpoint, or a setting is bad,
 *   or the data changed since the base was trained; CheckpointError on a broken base, or one
 *   that fine-tunes a Hugging Face model (start from the Hugging Face folder instead).
 * @example const run = await initRun({ init: "runs/base", epochs: 2, jasmin: { lambda: 0.1 }, out: "runs/ft" });
 */
export async function initRun(options: TrainOptions & { init: string }): Promise<TrainingRun> {
  const settings = newRunSettings(options);
  const base = resolve(options.init);
  if (options.out != null && resolve(options.out) === base)
    throw new InputError(`out: ${options.out} is the checkpoint given to --init; a run started from it writes to another folder`);
  const out = newRunFolder(options);
  const ckpt = await loadCheckpoint(base);
  const { model } = ckpt;
  try {
    const baseState = ckpt.trainState;
    if (baseState.pretrained?.source === "huggingface")
      throw new CheckpointError(
        `init: ${options.init} fine-tunes the Hugging Face model ${baseState.pretrained.path}; continue it with --resume, or start from that folder with --model`,
      );
    const kind = kindOfModel(model.config);
    refuseAugment(settings, kind, baseState.data.spec);
    const dataset = options.dataset ?? (await kind.reload(baseState, ckpt.tokenizer));
    checkSameData("init", baseState, dataset);
    refuseLargeShift(settings, dataset);
    const state = newTrainState(options, settings, baseState.seed, { ...baseState.data }, model.config.blocks);
    const weights = readFileSync(join(base, "model.safetensors"));
    state.pretrained = {
      source: "attnlip",
      path: base,
      epoch: baseState.epoch,
      step: baseState.step,
      weightsSha256: createHash("sha256").update(weights).digest("hex"),
    };
    return await startRun(options, { model, state, out, kind, dataset, hfConfig: null, weightDecay: settings.weightDecay });
  } catch (e) {
    model.dispose();
    throw e;
  }
}

/** The optimizer and JaSMin settings of a new run (fresh or from --init), validated. */
function newRunSettings(options: TrainOptions) {
  const epochs = positiveInt("epochs", options.epochs, 3);
  const batchSize = positiveInt("batch", options.batchSize, 32);
  const lr = nonNegative("lr", options.lr, 2e-3);
  const minLr = nonNegative("min-lr", options.minLr, 0);
  const weightDecay = nonNegative("weight-decay", options.weightDecay, 0.05);
  const clip = nonNegative("clip", options.clip, 1);
  const lambda = nonNegative("jasmin", options.jasmin?.lambda, 0);
  const augmentShift = options.augmentShift ?? 0;
  if (!Number.isSafeInteger(augmentShift) || augmentShift < 0)
    throw new InputError(`augment-shift: must be an integer >= 0 (pixels), got ${augmentShift}`);
  if (minLr > lr)
    throw new InputError(`min-lr: ${minLr} is above lr ${lr}: the cosine decay ends at min-lr and must not rise above the peak rate`);
  if (lambda > JASMIN_MAX_LAMBDA)
    throw new InputError(`jasmin: lambda must be at most ${JASMIN_MAX_LAMBDA}, got ${lambda} (beyond it the penalty drowns the cross-entropy in float32)`);
  return { epochs, batchSize, lr, minLr, weightDecay, clip, lambda, augmentShift };
}

/**
 * A checkpoint's data as reloaded is the data it was trained on: the same content digest
 * (where recorded) and the same split (data/heldOut.ts).
 *
 * @throws InputError naming `who` (resume, init) when the data changed since training.
 */
function checkSameData(who: string, state: TrainState, dataset: AnyDataset): void {
  const recorded = state.data.contentDigest;
  if (recorded !== undefined && dataset.contentDigest !== recorded)
    throw changedDataError(who, state.data.spec, String(dataset.contentDigest), recorded);
  checkRebuiltSplit(who, state.data.spec, state.data, dataset.train.indices, dataset.test.indices);
}

/**
 * Before the data is read: augmentation the data's kind does not have is refused.
 *
 * @throws InputError naming --augment-shift and the data.
 */
function refuseAugment(settings: ReturnType<typeof newRunSettings>, kind: TrainingKind, spec: string): void {
  if (settings.augmentShift > 0 && kind.augment === undefined)
    throw new InputError(`augment-shift: shifts images; ${spec} is ${kind.task} data`);
}

/**
 * A shift as large as the images moves every one of them out of its frame (a blank image).
 *
 * @throws InputError naming --augment-shift and the image size.
 */
function refuseLargeShift(settings: ReturnType<typeof newRunSettings>, dataset: AnyDataset): void {
  if (settings.augmentShift === 0 || !("shape" in dataset.train)) return;
  const [h, w] = dataset.train.shape;
  if (settings.augmentShift >= Math.min(h, w))
    throw new InputError(`augment-shift: ${settings.augmentShift} pixels moves every ${h}x${w} image of ${dataset.spec} out of its frame; give less than ${Math.min(h, w)}`);
}

/**
 * A new run's output folder (absolute), or null for none.
 *
 * @throws InputError when it already holds a checkpoint.
 */
function newRunFolder(options: TrainOptions): string | null {
  const out = options.out == null ? null : resolve(options.out);
  if (out !== null && isCheckpointFolder(out)) {
    // Only some of a checkpoint's files (no readable train state): not one --resume continues.
    if (readSavedTrainState(out) === null) {
      const held = CHECKPOINT_FILES.filter((f) => existsSync(join(out, f)));
      throw new InputError(
        `out: ${options.out} already holds ${held.length > 0 ? held.join(", ") : "an unfinished checkpoint commit"} but no readable train_state.json, so not a checkpoint --resume can continue; move those files away or choose another folder`,
      );
    }
    throw new InputError(
      `out: ${options.out} already holds a checkpoint; continue it with --resume ${options.out} or choose another folder`,
    );
  }
  return out;
}

/**
 * A new run's train state at step 0: the settings, the data record, the schedule over all its
 * epochs and the shuffling stream started from `seed`.
 *
 * @throws InputError on bad JaSMin layers or a bad warm-up.
 */
function newTrainState(
  options: TrainOptions,
  settings: ReturnType<typeof newRunSettings>,
  seed: number,
  data: TrainState["data"],
  blocks: number,
): TrainState {
  let layers: number[] | null = null;
  try {
    layers = options.jasmin?.layers == null ? null : selectLayers(blocks, options.jasmin.layers);
  } catch (e) {
    throw new InputError(`--jasmin-layers: ${(e as Error).message.replace(/^jasmin: /, "")}`);
  }
  const { epochs, batchSize, lr, minLr, weightDecay, clip, lambda } = settings;
  const totalSteps = epochs * batchCount(data.trainCount, batchSize);
  const warmupSteps = options.warmupSteps ?? Math.round(0.1 * totalSteps);
  if (!Number.isSafeInteger(warmupSteps) || warmupSteps < 0)
    throw new InputError(`warmup: must be an integer >= 0, got ${warmupSteps}`);
  return {
    format: "attnlip-train-state",
    version: 1,
    epoch: 0,
    step: 0,
    epochs,
    seed,
    batchSize,
    data,
    jasmin: {
      lambda,
      norm: options.jasmin?.norm ?? "top2",
      reduce: options.jasmin?.reduce ?? "max-log",
      layers,
    },
    optimizer: {
      name: "adamw",
      lr,
      minLr,
      warmupSteps,
      totalSteps,
      weightDecay,
      clip,
      beta1: 0.9,
      beta2: 0.999,
      epsilon: 1e-8,
    },
    ...(settings.augmentShift > 0 ? { augment: { shift: settings.augmentShift } } : {}),
    rng: { shuffle: new SeededRng(seed).state },
    trainSeconds: 0,
    history: [],
  };
}

/** A new run's last steps: a fresh AdamW, an empty metrics.jsonl in `out`, the held-out test split. */
async function startRun(
  options: TrainOptions,
  parts: {
    model: Model;
    state: TrainState;
    out: string | null;
    kind: TrainingKind;
    dataset: AnyDataset;
    hfConfig: Record<string, unknown> | null;
    weightDecay: number;
  },
): Promise<TrainingRun> {
  const { model, state, out, kind, dataset, hfConfig } = parts;
  const optimizer = new AdamW(model.params.parameters(), { weightDecay: parts.weightDecay });
  if (out !== null) {
    await mkdir(out, { recursive: true });
    keepEarlierMetrics(out, options.warn ?? console.error);
    await writeFileAtomically(join(out, "metrics.jsonl"), "");
  }
  const held = heldOutTest(kind, dataset);
  recordHeldOut(state, held);
  return { model, optimizer, state, out, kind, hfConfig, ...held };
}

/**
 * Before any training: the folder where a fine-tuned Hugging Face model is written at the end
 * (RUN/hf) must be a folder or absent.
 *
 * @throws InputError naming it.
 */
function checkHfExportFolder(out: string): void {
  const dir = join(out, HF_EXPORT_FOLDER);
  if (existsSync(dir) && !statSync(dir).isDirectory())
    throw new InputError(`train: ${dir} is a file; a fine-tuned Hugging Face model is written there in its own format at the end, so move the file away first`);
}

/**
 * A Hugging Face model to fine-tune: the imported model, its config.json and, for text, its
 * tokenizer (src/hf/).
 *
 * @throws HfImportError on a folder attnlip cannot import (named `model:`).
 */
async function importForTraining(dir: string): Promise<HfModel & { tokenizer: TextTokenizer | null }> {
  const hf = await loadHfModel(dir, "model");
  try {
    const tokenizer = hf.config.kind === "text" ? await hfTextTokenizer(dir, hf.config, hf.hfConfig, "model") : null;
    return { ...hf, tokenizer };
  } catch (e) {
    hf.model.dispose();
    throw e;
  }
}

/**
 * A run restored from the checkpoint in `options.resume`: model, optimizer state, train state
 * and RNG as saved, the same data (same content digest where recorded, same split, checked
 * by sizes and digests; the checkpoint's tokenizer for text), metrics.jsonl cut back to the
 * checkpoint's step. `options.epochs` extends or shortens the run (the schedule is recomputed).
 *
 * @throws CheckpointError on a broken checkpoint; InputError when `options.out` names another
 *   folder or the data changed since training.
 * @example const run = await restoreRun({ resume: "runs/base", epochs: 5 });
 */
export async function restoreRun(options: TrainOptions & { resume: string }): Promise<TrainingRun> {
  const out = resolve(options.resume);
  if (options.out != null && resolve(options.out) !== out)
    throw new InputError(
      `out: a resumed run writes to its own folder ${options.resume}; leave --out out or give the same folder`,
    );
  const ckpt = await loadCheckpoint(out);
  const { model } = ckpt;
  const state = ckpt.trainState;
  try {
    const kind = kindOfModel(model.config);
    const dataset = options.dataset ?? (await kind.reload(state, ckpt.tokenizer));
    checkSameData("resume", state, dataset);
    if (options.epochs !== undefined && options.epochs !== state.epochs) {
      state.epochs = positiveInt("epochs", options.epochs, 1);
      state.optimizer.totalSteps =
        state.epochs * batchCount(state.data.trainCount, state.batchSize);
    }
    const o = state.optimizer;
    const optimizer = new AdamW(model.params.parameters(), {
      beta1: o.beta1,
      beta2: o.beta2,
      epsilon: o.epsilon,
      weightDecay: o.weightDecay,
    });
    optimizer.setState(await loadOptimizerState(out, model, state));
    await truncateMetrics(join(out, "metrics.jsonl"), state.step);
    const held = heldOutTest(kind, dataset);
    recordHeldOut(state, held);
    if (ckpt.hfConfig !== null) checkHfExportFolder(out);
    return { model, optimizer, state, out, kind, hfConfig: ckpt.hfConfig, ...held };
  } catch (e) {
    model.dispose();
    throw e;
  }
}

/** Keeps the metrics.jsonl records of steps <= step (a resumed run rewrites what followed its checkpoint). */
async function truncateMetrics(path: string, step: number): Promise<void> {
  if (!existsSync(path)) return;
  const kept = readFileSync(path, "utf8")
    .split("\n")
    .filter((line) => {
      if (line.trim() === "") return false;
      try {
        return (JSON.parse(line) as { step?: number }).step! <= step;
      } catch {
        return false;
      }
    });
  await writeFileAtomically(path, kept.map((l) => l + "\n").join(""));
}
