import { indexDigest, splitDigests } from "../data/heldOut.ts";
import { appendFileSync, existsSync, readFileSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join, resolve } from "node:path";
import { tf } from "../backend.ts";
import {
  batchCount,
  batches,
  loadDataset,
  SeededRng,
  shuffledOrder,
  type Batch,
  type ImageDataset,
} from "../data/dataset.ts";
import { writeFileAtomically } from "../io/atomicWrite.ts";
import {
  isTextDataSpec,
  loadTextDataset,
  textBatches,
  textBatchTensors,
  type TextBatch,
  type TextDataset,
} from "../data/text/dataset.ts";
import type { WordTokenizer } from "../data/text/tokenizer.ts";
import { ConfigError, modelPreset, parseModelConfig, type ModelConfig, type ModelConfigInput } from "../nn/config.ts";
import { createModel, type Model } from "../nn/create.ts";
import { disposeTrace, type ForwardTrace } from "../nn/trace.ts";
import { InputError } from "../softmax/parse.ts";
import {
  isCheckpointFolder,
  loadCheckpoint,
  loadOptimizerState,
  saveCheckpoint,
  type TrainState,
} from "./checkpoint.ts";
import { evaluate } from "./evaluate.ts";
import { crossEntropy } from "./loss.ts";
import { jasminPenalty, meanTraceSigma, selectLayers, type JasminNorm, type JasminReduce } from "./jasmin.ts";
import { AdamW, clipByGlobalNorm } from "./optimizer.ts";
import { createProgress, type ProgressMode } from "./progress.ts";
import { learningRateAt } from "./schedule.ts";
import { evaluateText } from "./textEvaluate.ts";

/**
 * Training of the ViT on image data, or of the text classifier on text data (padding masks
 * honoured in attention, JaSMin and evaluation), with cross-entropy + lambda * JaSMin (docs/math.md section 4),
 * AdamW, linear warm-up + cosine decay, gradient clipping, per-epoch evaluation, metrics in
 * metrics.jsonl and resumable checkpoints (checkpoint.ts).
 */

/**
 * The loss became NaN or infinite (or the gradient norm did): the run stops before applying
 * that update; the last checkpoint on disk (end of the previous epoch) is left intact. An
 * InputError (the usual cause is a setting such as the learning rate, or bad data), so the CLI
 * prints it as one line with exit code 2.
 */
export class TrainingDiverged extends InputError {
  override name = "TrainingDiverged";
  constructor(
    message: string,
    /** 1-based epoch and global step (1-based) at which it happened. */
    readonly epoch: number,
    readonly step: number,
  ) {
    super(message);
  }
}

/** JaSMin settings of a run. */
export interface JasminSettings {
  /** Weight lambda of the penalty (0: off; meanSigma is still reported). */
  lambda: number;
  norm: JasminNorm;
  reduce: JasminReduce;
  /** Block indices, or null for all. */
  layers: number[] | null;
}

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
  /** Text files: the character encoding ["auto": UTF-8, else Windows-1252]; recorded in the checkpoint. */
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
  /** Decoupled weight decay on weight matrices [0.05]. */
  weightDecay?: number;
  /** Linear warm-up steps [10% of the total steps]. */
  warmupSteps?: number;
  /** Gradient clipping: max global l2 norm; 0 = off [1]. */
  clip?: number;
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
  /** Stop (as if interrupted) once this many epochs are complete (tests). */
  stopAfterEpoch?: number;
  /** Progress display ["auto"]. */
  progress?: ProgressMode;
  /** Where progress and epoch lines go [console.log]. */
  log?: (line: string) => void;
  /** Examples per evaluation forward pass [250]. */
  evalBatchSize?: number;
}

/** Figures of one optimizer step. */
export type StepMetrics = {
  /** cross-entropy + lambda * jasmin (mean over the batch). */
  loss: number;
  crossEntropy: number;
  /** JaSMin R (0 when lambda = 0). */
  jasmin: number;
  /** Mean per-row sigma over every layer, head and row of the batch (the JaSMin norm). */
  meanSigma: number;
  /** Correct predictions in the batch. */
  correct: number;
  /** Global gradient norm before clipping. */
  gradNorm: number;
  /** Whether loss and gradient norm were finite (the update was applied only then). */
  finite: boolean;
};

/** What {@link train} returns. The caller owns the model (dispose it). */
export interface TrainResult {
  model: Model;
  trainState: TrainState;
  /** Test accuracy / cross-entropy after the last completed epoch (NaN when no epoch ran). */
  finalTestAccuracy: number;
  finalTestCrossEntropy: number;
  /** Wall time of this call, seconds (training, evaluation, checkpoints). */
  wallSeconds: number;
  /** Training time of this call, seconds (steps only). */
  trainSeconds: number;
  /** Training images per second in this call. */
  imagesPerSecond: number;
  /** Output folder (absolute), or null. */
  out: string | null;
}

/**
 * One training step on a batch: forward with attention trace (training mode), cross-entropy +
 * lambda * JaSMin, gradients of every model variable, clipping by global norm, and the AdamW
 * update with learning rate `lr`, applied only when the loss and the gradient norm are finite.
 * Everything runs inside tidy: tf.memory().numTensors is the same before and after.
 *
 * @param x float32 images [b, pixels] (or any shape the model accepts), or int32 token ids
 *   [b, n] with settings.mask float32 [b, n] (1 = real token); labels int32 [b].
 * @returns the step's figures (read back with one synchronisation).
 * @throws RangeError/TypeError from the model on malformed inputs.
 */
export function trainStep(
  model: Model,
  optimizer: AdamW,
  x: tf.Tensor,
  labels: tf.Tensor,
  settings: { lr: number; clip: number; jasmin: JasminSettings; mask?: tf.Tensor | null },
): StepMetrics {
  const vars = model.variables();
  const { lambda, norm } = settings.jasmin;
  const kept: tf.Tensor[] = [];
  const traces: ForwardTrace[] = [];
  try {
    return tf.tidy(() => {
      const { value, grads } = tf.variableGrads(() => {
        const { logits, trace } = model.forward(x, { trace: true, training: true, mask: settings.mask ?? null });
        traces.push(trace!);
        const ce = crossEntropy(logits, labels, "mean", "trainStep");
        const reg = lambda > 0 ? jasminPenalty(trace!, settings.jasmin) : tf.scalar(0);
        const sigma = meanTraceSigma(trace!, norm);
        const correct = tf.sum(tf.cast(tf.equal(tf.argMax(logits, 1), labels), "float32"));
        // Kept past variableGrads' own tidy; freed in `finally`.
        kept.push(tf.keep(tf.stack([ce, reg, sigma, correct])));
        return (lambda > 0 ? tf.add(ce, tf.mul(reg, lambda)) : tf.add(ce, 0)) as tf.Scalar;
      }, vars);
      const gradList = vars.map((v) => grads[v.name]);
      const { clipped, norm: gradNorm } = clipByGlobalNorm(gradList, settings.clip);
      const values = tf.concat([kept[0], tf.reshape(value, [1]), tf.reshape(gradNorm, [1])]).dataSync();
      const [ce, reg, sigma, correct, loss, gn] = values;
      const finite = Number.isFinite(loss) && Number.isFinite(gn);
      if (finite) optimizer.apply(clipped, settings.lr);
      return { loss, crossEntropy: ce, jasmin: reg, meanSigma: sigma, correct, gradNorm: gn, finite };
    });
  } finally {
    for (const t of kept) t.dispose();
    for (const t of traces) disposeTrace(t);
  }
}

function positiveInt(name: string, v: number | undefined, fallback: number): number {
  const value = v ?? fallback;
  if (!Number.isSafeInteger(value) || value < 1) throw new InputError(`${name}: must be a positive integer, got ${value}`);
  return value;
}

function nonNegative(name: string, v: number | undefined, fallback: number): number {
  const value = v ?? fallback;
  if (!Number.isFinite(value) || value < 0) throw new InputError(`${name}: must be a finite number >= 0, got ${value}`);
  return value;
}

/**
 * The model config for a data set: a preset gets imageSize, channels (and classes) from the
 * data; an explicit config must match the data.
 *
 * @throws InputError when the images are not square, the preset's patch size does not divide
 *   the image size, the model is not a ViT, or an explicit config does not fit the data.
 */
export function modelConfigForData(model: string | ModelConfigInput, dataset: ImageDataset): ModelConfig {
  const [h, w, c] = dataset.train.shape;
  try {
    if (typeof model === "string" && !model.trimStart().startsWith("{")) {
      const preset = modelPreset(model);
      if (preset.kind !== "vit") throw new InputError(`model: "${model}" is a text model; image data needs a ViT`);
      if (h !== w) throw new InputError(`model: images are ${h}x${w}; the ViT needs square images`);
      return parseModelConfig({ ...preset, imageSize: h, channels: c, classes: dataset.classes });
    }
    const config = parseModelConfig(model);
    if (config.kind !== "vit") throw new InputError("model: image data needs a ViT config (kind \"vit\")");
    if (config.imageSize !== h || config.imageSize !== w || config.channels !== c)
      throw new InputError(
        `model: config expects ${config.imageSize}x${config.imageSize}x${config.channels} images, the data has ${h}x${w}x${c}`,
      );
    if (config.classes < dataset.classes)
      throw new InputError(`model: config has ${config.classes} classes, the data has ${dataset.classes}`);
    return config;
  } catch (e) {
    if (e instanceof ConfigError) throw new InputError(e.message);
    throw e;
  }
}

/**
 * The model config for a text data set: a preset (or a JSON config) whose classes are set to
 * (preset) or checked against (explicit config) the data's classes.
 *
 * @throws InputError when the model is not a text model, or an explicit config has fewer
 *   classes than the data or a vocabulary / length smaller than the tokenizer's.
 */
export function modelConfigForText(model: string | ModelConfigInput, dataset: Pick<TextDataset, "classes" | "tokenizer">): ModelConfig {
  try {
    const base = baseTextConfig(model);
    const config = typeof model === "string" && !model.trimStart().startsWith("{")
      ? parseModelConfig({ ...base, classes: dataset.classes })
      : base;
    if (config.kind !== "text") throw new InputError("model: text data needs a text model");
    if (config.classes < dataset.classes)
      throw new InputError(`model: config has ${config.classes} classes, the data has ${dataset.classes}`);
    if (config.vocabSize < dataset.tokenizer.size || config.maxLength < dataset.tokenizer.maxLength)
      throw new InputError(
        `model: vocabSize ${config.vocabSize} / maxLength ${config.maxLength} are smaller than the tokenizer's ${dataset.tokenizer.size} / ${dataset.tokenizer.maxLength}`,
      );
    return config;
  } catch (e) {
    if (e instanceof ConfigError) throw new InputError(e.message);
    throw e;
  }
}

/** A text preset or config as given (classes not yet set). @throws InputError on an image model. */
function baseTextConfig(model: string | ModelConfigInput): ModelConfig {
  try {
    const config = typeof model === "string" && !model.trimStart().startsWith("{") ? modelPreset(model) : parseModelConfig(model);
    if (config.kind !== "text")
      throw new InputError(`model: ${typeof model === "string" ? `"${model}"` : "the config"} is a ViT; text data needs a text model (e.g. text-tiny)`);
    return config;
  } catch (e) {
    if (e instanceof ConfigError) throw new InputError(e.message);
    throw e;
  }
}

/** Loads a text data set for training: a given tokenizer (resume) or one sized to the model. */
async function loadTextForTraining(
  spec: string,
  options: { seed: number; limit?: number; testLimit?: number; textColumn?: string; labelColumn?: string; encoding?: string; labelNames?: string[] },
  sizing: { tokenizer?: WordTokenizer; vocabSize?: number; maxLength?: number },
): Promise<TextDataset> {
  return loadTextDataset(spec, { ...options, ...sizing });
}

function isText(d: ImageDataset | TextDataset): d is TextDataset {
  return (d as TextDataset).kind === "text";
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

function mean(sum: number, n: number): number {
  return n > 0 ? sum / n : NaN;
}

/**
 * Trains (or resumes training of) a ViT classifier on images, or a text classifier on text
 * (spam, csv:FILE, jsonl:FILE; the tokenizer is built from the training split and saved as
 * tokenizer.json; each batch is trimmed to its longest row and padded positions are masked);
 * see {@link TrainOptions}.
 *
 * Per epoch: a permutation of the training set from the seeded shuffling stream, batches of
 * `batchSize` (the last one smaller), one {@link trainStep} each, then evaluation on the test
 * split; with `out`, a metrics.jsonl record per step and per epoch and a checkpoint at the end
 * of each epoch. Resuming reaches the same weights as an uninterrupted run with the same
 * settings (dropout 0; tf.dropout draws unseeded randomness).
 *
 * @throws InputError on bad settings or data, or when `out` already holds a checkpoint (resume
 *   it instead); CheckpointError on a broken checkpoint to resume; TrainingDiverged on a NaN or
 *   infinite loss (the previous checkpoint stays intact).
 */
export async function train(options: TrainOptions): Promise<TrainResult> {
  const wallStart = performance.now();
  const log = options.log ?? console.log;
  let model: Model;
  let state: TrainState;
  let dataset: ImageDataset | TextDataset;
  let optimizer: AdamW;
  let out: string | null;

  if (options.resume !== undefined) {
    out = resolve(options.resume);
    if (options.out != null && resolve(options.out) !== out)
      throw new InputError(`out: a resumed run writes to its own folder ${options.resume}; leave --out out or give the same folder`);
    const ckpt = await loadCheckpoint(out);
    model = ckpt.model;
    state = ckpt.trainState;
    try {
      const limits = { seed: state.seed, limit: state.data.limit ?? undefined, testLimit: state.data.testLimit ?? undefined };
      dataset =
        options.dataset ??
        (model.config.kind === "text"
          ? await loadTextForTraining(
              state.data.spec,
              {
                ...limits,
                textColumn: state.data.textColumn ?? undefined,
                labelColumn: state.data.labelColumn ?? undefined,
                encoding: state.data.encoding ?? undefined,
                labelNames: state.data.labels,
              },
              { tokenizer: ckpt.tokenizer ?? undefined },
            )
          : await loadDataset(state.data.spec, limits));
      if (dataset.train.count !== state.data.trainCount)
        throw new InputError(
          `resume: the data now has ${dataset.train.count} training examples, the checkpoint was trained on ${state.data.trainCount}`,
        );
      if (state.data.trainDigest !== undefined && state.data.trainDigest !== indexDigest(dataset.train.indices))
        throw new InputError(
          `resume: the training split of ${state.data.spec} rebuilt from the checkpoint's seed differs from the one it was trained on (the data changed since training)`,
        );
      if (options.epochs !== undefined && options.epochs !== state.epochs) {
        state.epochs = positiveInt("epochs", options.epochs, 1);
        state.optimizer.totalSteps = state.epochs * batchCount(state.data.trainCount, state.batchSize);
      }
      const o = state.optimizer;
      optimizer = new AdamW(model.params.entries(), {
        beta1: o.beta1,
        beta2: o.beta2,
        epsilon: o.epsilon,
        weightDecay: o.weightDecay,
      });
      optimizer.setState(await loadOptimizerState(out, model, state));
    } catch (e) {
      model.dispose();
      throw e;
    }
    await truncateMetrics(join(out, "metrics.jsonl"), state.step);
  } else {
    const seed = options.seed ?? 0;
    if (!Number.isSafeInteger(seed)) throw new InputError(`seed: must be an integer, got ${seed}`);
    const epochs = positiveInt("epochs", options.epochs, 3);
    const batchSize = positiveInt("batch", options.batchSize, 32);
    const lr = nonNegative("lr", options.lr, 2e-3);
    const minLr = nonNegative("min-lr", options.minLr, 0);
    const weightDecay = nonNegative("weight-decay", options.weightDecay, 0.05);
    const clip = nonNegative("clip", options.clip, 1);
    const lambda = nonNegative("jasmin", options.jasmin?.lambda, 0);
    if (options.limit !== undefined) positiveInt("limit", options.limit, 1);
    if (options.testLimit !== undefined) positiveInt("test-limit", options.testLimit, 1);
    out = options.out == null ? null : resolve(options.out);
    if (out !== null && isCheckpointFolder(out))
      throw new InputError(`out: ${options.out} already holds a checkpoint; continue it with --resume ${options.out} or choose another folder`);
    const spec = options.data ?? "mnist";
    let config: ModelConfig;
    if (options.dataset !== undefined ? isText(options.dataset) : isTextDataSpec(spec)) {
      const base = baseTextConfig(options.model ?? "text-tiny");
      if (base.kind !== "text") throw new InputError("model: text data needs a text model");
      dataset =
        options.dataset ??
        (await loadTextForTraining(
          spec,
          { seed, limit: options.limit, testLimit: options.testLimit, textColumn: options.textColumn, labelColumn: options.labelColumn, encoding: options.encoding },
          { vocabSize: base.vocabSize, maxLength: base.maxLength },
        ));
      config = modelConfigForText(options.model ?? "text-tiny", dataset as TextDataset);
    } else {
      dataset = options.dataset ?? (await loadDataset(spec, { seed, limit: options.limit, testLimit: options.testLimit }));
      config = modelConfigForData(options.model ?? "vit-tiny", dataset as ImageDataset);
    }
    let layers: number[] | null = null;
    try {
      layers = options.jasmin?.layers == null ? null : selectLayers(config.blocks, options.jasmin.layers);
    } catch (e) {
      throw new InputError(`--jasmin-layers: ${(e as Error).message.replace(/^jasmin: /, "")}`);
    }
    const totalSteps = epochs * batchCount(dataset.train.count, batchSize);
    const warmupSteps = options.warmupSteps ?? Math.round(0.1 * totalSteps);
    if (!Number.isSafeInteger(warmupSteps) || warmupSteps < 0)
      throw new InputError(`warmup: must be an integer >= 0, got ${warmupSteps}`);
    state = {
      format: "attnlip-train-state",
      version: 1,
      epoch: 0,
      step: 0,
      epochs,
      seed,
      batchSize,
      data: {
        spec: dataset.spec,
        limit: options.limit ?? null,
        testLimit: options.testLimit ?? null,
        trainCount: dataset.train.count,
        testCount: dataset.test.count,
        ...splitDigests(dataset.train.indices, dataset.test.indices),
        ...(isText(dataset)
          ? { labels: dataset.labelNames, textColumn: dataset.textColumn, labelColumn: dataset.labelColumn, encoding: dataset.encoding }
          : {}),
      },
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
      rng: { shuffle: new SeededRng(seed).state },
      trainSeconds: 0,
      history: [],
    };
    model = createModel(config, seed);
    optimizer = new AdamW(model.params.entries(), { weightDecay });
    if (out !== null) {
      await mkdir(out, { recursive: true });
      await writeFileAtomically(join(out, "metrics.jsonl"), "");
    }
  }

  const jasmin = state.jasmin as JasminSettings;
  const rng = new SeededRng(state.rng.shuffle);
  const progress = createProgress(options.progress ?? "auto", log);
  const metricsPath = out === null ? null : join(out, "metrics.jsonl");
  const record = (r: object) => {
    if (metricsPath !== null) appendFileSync(metricsPath, JSON.stringify(r) + "\n");
  };
  const steps = batchCount(state.data.trainCount, state.batchSize);
  const lastEpoch = Math.min(state.epochs, options.stopAfterEpoch ?? state.epochs);
  let trainSeconds = 0;
  let trainedImages = 0;
  const last = state.history.at(-1);
  let finalTestAccuracy = last?.testAccuracy ?? NaN;
  let finalTestCrossEntropy = last?.testCrossEntropy ?? NaN;

  try {
    for (let epoch = state.epoch + 1; epoch <= lastEpoch; epoch++) {
      const order = shuffledOrder(dataset.train.count, rng);
      progress.startEpoch(epoch, state.epochs, steps);
      const epochStart = performance.now();
      let epochSeconds = 0;
      let seen = 0;
      let done = 0;
      const sums = { loss: 0, ce: 0, jasmin: 0, sigma: 0, correct: 0 };
      let lr = 0;
      const epochBatches: Iterable<Batch | TextBatch> = isText(dataset)
        ? textBatches(dataset.train, order, state.batchSize)
        : batches(dataset.train, order, state.batchSize);
      for (const batch of epochBatches) {
        lr = learningRateAt(state.step, state.optimizer);
        const t0 = performance.now();
        const m = tf.tidy(() => {
          const y = tf.tensor1d(batch.labels, "int32");
          if ("ids" in batch) {
            const { ids, mask } = textBatchTensors(batch);
            return trainStep(model, optimizer, ids, y, { lr, clip: state.optimizer.clip, jasmin, mask });
          }
          const x = tf.tensor2d(batch.images, [batch.size, batch.images.length / batch.size]);
          return trainStep(model, optimizer, x, y, { lr, clip: state.optimizer.clip, jasmin });
        });
        const dt = (performance.now() - t0) / 1000;
        if (!m.finite) {
          const what = Number.isFinite(m.loss) ? `the gradient norm is ${m.gradNorm}` : `the loss is ${m.loss}`;
          const kept =
            out === null
              ? "no checkpoint was written (no output folder)"
              : state.epoch > 0
                ? `the checkpoint of epoch ${state.epoch} in ${out} is intact`
                : `no checkpoint had been written yet`;
          throw new TrainingDiverged(
            `training diverged at epoch ${epoch}, step ${state.step + 1}: ${what} ` +
              `(cross-entropy ${m.crossEntropy}, jasmin ${m.jasmin}, lr ${lr.toPrecision(3)}); ${kept}; ` +
              `try a lower --lr, --clip or --jasmin, or check the data for NaN`,
            epoch,
            state.step + 1,
          );
        }
        epochSeconds += dt;
        state.step++;
        done++;
        seen += batch.size;
        sums.loss += m.loss * batch.size;
        sums.ce += m.crossEntropy * batch.size;
        sums.jasmin += m.jasmin * batch.size;
        sums.sigma += m.meanSigma * batch.size;
        sums.correct += m.correct;
        record({
          type: "step",
          epoch,
          step: state.step,
          loss: m.loss,
          crossEntropy: m.crossEntropy,
          jasmin: m.jasmin,
          accuracy: sums.correct / seen,
          meanSigma: m.meanSigma,
          gradNorm: m.gradNorm,
          lr,
          time: state.trainSeconds + epochSeconds,
        });
        progress.update(done, { loss: sums.loss / seen, accuracy: sums.correct / seen, imagesPerSecond: seen / epochSeconds });
      }
      progress.endEpoch();
      trainSeconds += epochSeconds;
      trainedImages += seen;
      state.trainSeconds += epochSeconds;
      const evalOptions = { batchSize: options.evalBatchSize };
      const test =
        dataset.test.count === 0
          ? null
          : isText(dataset)
            ? evaluateText(model, dataset.test, evalOptions)
            : evaluate(model, dataset.test, evalOptions);
      finalTestAccuracy = test?.accuracy ?? NaN;
      finalTestCrossEntropy = test?.crossEntropy ?? NaN;
      // Finite training steps can still leave weights whose test logits overflow (a huge
      // learning rate): stop before saving them, keeping the previous epoch's checkpoint.
      if (test !== null && !Number.isFinite(test.crossEntropy))
        throw new TrainingDiverged(
          `training diverged in epoch ${epoch}: the test cross-entropy is ${test.crossEntropy} (the model's outputs overflow; ` +
            `try a lower --lr); ${out !== null && state.epoch > 0 ? `the checkpoint of epoch ${state.epoch} in ${out} is intact` : "nothing was saved for this epoch"}`,
          epoch,
          state.step,
        );
      const summary = {
        epoch,
        step: state.step,
        testAccuracy: test?.accuracy ?? null,
        testCrossEntropy: test?.crossEntropy ?? null,
        trainLoss: mean(sums.loss, seen),
        trainAccuracy: mean(sums.correct, seen),
        meanSigma: mean(sums.sigma, seen),
        seconds: epochSeconds,
      };
      state.history.push(summary);
      state.epoch = epoch;
      state.rng.shuffle = rng.state;
      record({
        type: "epoch",
        epoch,
        step: state.step,
        loss: summary.trainLoss,
        crossEntropy: mean(sums.ce, seen),
        jasmin: mean(sums.jasmin, seen),
        accuracy: summary.trainAccuracy,
        testAccuracy: summary.testAccuracy,
        testCrossEntropy: summary.testCrossEntropy,
        meanSigma: summary.meanSigma,
        lr,
        time: state.trainSeconds,
      });
      if (out !== null)
        await saveCheckpoint(out, { model, optimizer, state, tokenizer: isText(dataset) ? dataset.tokenizer : null });
      const testText = test === null ? "no test set" : `test accuracy ${(100 * test.accuracy).toFixed(2)}%, test cross-entropy ${test.crossEntropy.toFixed(4)}`;
      progress.log(
        `epoch ${epoch}/${state.epochs}: ${testText}, train loss ${summary.trainLoss.toFixed(4)}, ` +
          `train accuracy ${(100 * summary.trainAccuracy).toFixed(2)}%, mean sigma ${summary.meanSigma.toFixed(4)}, ` +
          `${epochSeconds.toFixed(1)} s (${(seen / epochSeconds).toFixed(1)} img/s), ` +
          `${((performance.now() - epochStart) / 1000).toFixed(1)} s with evaluation${out !== null ? ", checkpoint saved" : ""}`,
      );
    }
  } catch (e) {
    progress.endEpoch();
    optimizer.dispose();
    model.dispose();
    throw e;
  }
  optimizer.dispose();
  return {
    model,
    trainState: state,
    finalTestAccuracy,
    finalTestCrossEntropy,
    wallSeconds: (performance.now() - wallStart) / 1000,
    trainSeconds,
    imagesPerSecond: trainSeconds > 0 ? trainedImages / trainSeconds : NaN,
    out,
  };
}
