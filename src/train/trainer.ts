import { appendFileSync } from "node:fs";
import { join } from "node:path";
import { InputError } from "../util/errors.ts";
import { SeededRng } from "../data/dataset.ts";
import { HF_EXPORT_FOLDER, hfExportOf, writeHfFolder } from "../hf/export.ts";
import type { Model } from "../nn/create.ts";
import { readSavedTrainState, type TrainState } from "./checkpoint.ts";
import { trainEpoch } from "./epoch.ts";
import { createProgress } from "./progress.ts";
import { freshRun, initRun, restoreRun, type TrainOptions } from "./setup.ts";
import { localStepper, type Stepper } from "./stepper.ts";

/**
 * Training of the ViT on image data, or of the text classifier on text data (padding masks
 * honoured in attention, JaSMin and evaluation), with cross-entropy + lambda * JaSMin
 * (docs/math.md section 4), AdamW, linear warm-up + cosine decay, gradient clipping, per-epoch
 * evaluation, metrics in metrics.jsonl and resumable checkpoints (checkpoint.ts).
 *
 * The pieces, each short enough to read at once: setup.ts builds a run (fresh or restored from
 * a checkpoint: the only difference between the two), epoch.ts runs one epoch, step.ts one
 * optimizer step; schedule.ts and optimizer.ts hold the pure helpers.
 */

export { TrainingDiverged } from "./epoch.ts";
export { freshRun, initRun, restoreRun, type TrainingRun, type TrainOptions } from "./setup.ts";
export { trainStep, type JasminSettings, type StepMetrics } from "./step.ts";
export { localStepper, type Stepper, type StepperFactory, type StepSettings } from "./stepper.ts";
export { modelConfigForData, modelConfigForText } from "./modelConfig.ts";

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
 * Trains (or resumes training of) a ViT classifier on images, or a text classifier on text
 * (spam, csv:FILE, jsonl:FILE; the tokenizer is built from the training split and saved as
 * tokenizer.json; each batch is trimmed to its longest row and padded positions are masked);
 * see {@link TrainOptions}.
 *
 * Per epoch ({@link trainEpoch}): a permutation of the training set from the seeded shuffling
 * stream, batches of `batchSize` (the last one smaller), one step each, then evaluation on the
 * test split; with `out`, a metrics.jsonl record per step and per epoch and a checkpoint at the
 * end of each epoch. A new run on a text file first prints its classes with their counts and
 * warns (`warn`) about a class with fewer than 3 examples, naming the line of its first one.
 * Resuming reaches the same weights as an uninterrupted run with the same settings (dropout 0;
 * tf.dropout draws unseeded randomness).
 *
 * @throws InputError on bad settings or data, or when `out` already holds a checkpoint (resume
 *   it instead); CheckpointError on a broken checkpoint to resume; TrainingDiverged on a NaN or
 *   infinite loss (the previous checkpoint stays intact).
 * @example
 *   const r = await train({ data: "mnist", model: "vit-micro", epochs: 1, limit: 256, out: "runs/micro" });
 *   r.finalTestAccuracy; // e.g. 0.4
 *   r.model.dispose();
 */
export async function train(options: TrainOptions): Promise<TrainResult> {
  const wallStart = performance.now();
  const log = options.log ?? console.log;
  if (options.resume !== undefined && options.init !== undefined)
    throw new InputError(
      "init: a resumed run continues its own weights; give --resume or --init, not both",
    );
  const run =
    options.resume !== undefined
      ? await restoreRun({ ...options, resume: options.resume })
      : options.init !== undefined
        ? await initRun({ ...options, init: options.init })
        : await freshRun(options);
  const { state, out } = run;
  const rng = new SeededRng(state.rng.shuffle);
  const progress = createProgress(options.progress ?? "auto", log);
  const data = run.dataset;
  if (options.resume === undefined) {
    const { lines, warnings } = run.kind.describe(data);
    for (const line of lines) log(line);
    for (const line of warnings) (options.warn ?? console.error)(line);
  }
  if (run.testLeftOut > 0)
    log(
      `held-out test: ${run.testLeftOut} of ${state.data.testCount} test examples have the same input as a training example ` +
        `(duplicates in the data) and are left out of the test accuracy`,
    );
  const metricsPath = out === null ? null : join(out, "metrics.jsonl");
  let stepper: Stepper;
  try {
    stepper = await (options.stepper ?? localStepper)(run);
  } catch (e) {
    run.optimizer.dispose();
    run.model.dispose();
    throw e;
  }
  const record = (r: object) => {
    if (metricsPath !== null) appendFileSync(metricsPath, JSON.stringify(r) + "\n");
  };
  const lastEpoch = Math.min(state.epochs, options.stopAfterEpoch ?? state.epochs);
  if (options.resume !== undefined && state.epoch < lastEpoch)
    log(
      `resuming from epoch ${state.epoch} step ${state.step} of ${options.resume} (its last checkpoint): training epochs ${state.epoch + 1} to ${lastEpoch}`,
    );
  let trainSeconds = 0;
  let trainedImages = 0;
  const last = state.history.at(-1);
  let finalTestAccuracy = last?.testAccuracy ?? NaN;
  let finalTestCrossEntropy = last?.testCrossEntropy ?? NaN;
  try {
    for (let epoch = state.epoch + 1; epoch <= lastEpoch; epoch++) {
      const done = await trainEpoch(run, epoch, rng, {
        progress,
        record,
        evalBatchSize: options.evalBatchSize,
        stepper,
      });
      trainSeconds += done.seconds;
      trainedImages += done.seen;
      finalTestAccuracy = done.testAccuracy;
      finalTestCrossEntropy = done.testCrossEntropy;
    }
  } catch (e) {
    progress.endEpoch();
    await stepper.close();
    run.optimizer.dispose();
    run.model.dispose();
    throw e;
  }
  await stepper.close();
  run.optimizer.dispose();
  if (out !== null && run.hfConfig !== null && state.epoch === state.epochs && trainedImages > 0) {
    // A fine-tuned Hugging Face model is also written in its own format, next to the checkpoint.
    const exported = hfExportOf(
      {
        config: run.model.config,
        weights: run.model.getWeights(),
        hfConfig: run.hfConfig,
        tokenizer: run.kind.tokenizer(run.dataset)?.toJSON() ?? null,
        labels: state.data.labels,
      },
      "train",
    );
    await writeHfFolder(join(out, HF_EXPORT_FOLDER), exported, "train", { replace: true });
    progress.log(
      `wrote ${join(out, HF_EXPORT_FOLDER)} (Hugging Face ${exported.architecture.name}, the fine-tuned weights${exported.architecture.addsHead ? `; the head attnlip added is not part of ${exported.architecture.name} and stays in the checkpoint` : ""})`,
    );
  }
  return {
    model: run.model,
    trainState: state,
    finalTestAccuracy,
    finalTestCrossEntropy,
    wallSeconds: (performance.now() - wallStart) / 1000,
    trainSeconds,
    imagesPerSecond: trainSeconds > 0 ? trainedImages / trainSeconds : NaN,
    out,
  };
}

/**
 * The line `attnlip train` prints when it is interrupted (Ctrl-C): what the last checkpoint in
 * `out` holds and the command that continues it, or that nothing was saved yet (a checkpoint is
 * written at the end of each epoch).
 *
 * @param out the run's folder as the user named it (--out, or --resume's folder).
 * @example interruptedLine("runs/base")
 *   // "train: interrupted; runs/base keeps its checkpoint of epoch 2 of 5 (step 250): continue with attnlip train --resume runs/base"
 */
export function interruptedLine(out: string): string {
  const saved = readSavedTrainState(out);
  if (saved === null)
    return `train: interrupted before the first checkpoint (one is saved at the end of each epoch): nothing was saved in ${out}; run the command again to start over`;
  return `train: interrupted; ${out} keeps its checkpoint of epoch ${saved.epoch} of ${saved.epochs} (step ${saved.step}): continue with attnlip train --resume ${out}`;
}
