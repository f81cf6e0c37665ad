import { batchCount, SeededRng, shuffledOrder } from "../data/dataset.ts";
import { InputError } from "../util/errors.ts";
import { saveCheckpoint } from "./checkpoint.ts";
import { evaluateBatchesYielding, type Evaluation } from "./evaluate.ts";
import type { ProgressReporter } from "./progress.ts";
import { learningRateAt } from "./schedule.ts";
import type { TrainingRun } from "./setup.ts";
import type { JasminSettings, StepMetrics } from "./step.ts";
import type { Stepper } from "./stepper.ts";
import type { TrainState } from "./trainState.ts";

/** One epoch of training: shuffled batches, a step each, evaluation, the checkpoint. */

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

/** Where an epoch reports: the progress display and the metrics.jsonl record writer. */
export interface EpochOutput {
  progress: ProgressReporter;
  /** Appends one metrics.jsonl record (a no-op without an output folder). */
  record: (r: object) => void;
  /** Examples per evaluation forward pass (default: the evaluator's). */
  evalBatchSize?: number;
  /** Who computes the steps (stepper.ts: this thread, or worker threads). */
  stepper: Stepper;
}

/** What one epoch did. */
export interface EpochResult {
  /** The epoch's summary, as appended to state.history. */
  summary: TrainState["history"][number];
  /** Training examples seen and training seconds (steps only). */
  seen: number;
  seconds: number;
  /** Test accuracy and cross-entropy (NaN without a test split). */
  testAccuracy: number;
  testCrossEntropy: number;
}

function mean(sum: number, n: number): number {
  return n > 0 ? sum / n : NaN;
}

/** What the steps of an epoch add up: batch-size-weighted sums of the step figures. */
interface StepSums {
  loss: number;
  ce: number;
  jasmin: number;
  sigma: number;
  correct: number;
}

/** The steps of one epoch: examples seen, training seconds, sums and the last learning rate. */
interface EpochSteps {
  seen: number;
  seconds: number;
  sums: StepSums;
  lr: number;
}

/**
 * The error of a step whose loss or gradient norm is not finite (before its update): what was
 * not finite, the step's figures, and which checkpoint is intact.
 */
function divergedStep(
  run: TrainingRun,
  epoch: number,
  m: StepMetrics,
  lr: number,
): TrainingDiverged {
  const { state, out } = run;
  const what = Number.isFinite(m.loss)
    ? `the gradient norm is ${m.gradNorm}`
    : `the loss is ${m.loss}`;
  const kept =
    out === null
      ? "no checkpoint was written (no output folder)"
      : state.epoch > 0
        ? `the checkpoint of epoch ${state.epoch} in ${out} is intact`
        : `no checkpoint had been written yet`;
  return new TrainingDiverged(
    `training diverged at epoch ${epoch}, step ${state.step + 1}: ${what} ` +
      `(cross-entropy ${m.crossEntropy}, jasmin ${m.jasmin}, lr ${lr.toPrecision(3)}); ${kept}; ` +
      `try a lower --lr, --clip or --jasmin, or check the data for NaN`,
    epoch,
    state.step + 1,
  );
}

/**
 * The steps of epoch `epoch`: a permutation of the training split from `rng`, batches of
 * state.batchSize (augmented when the run augments), one step each at the scheduled learning
 * rate, a metrics.jsonl record and a progress update after each. Advances state.step.
 *
 * @throws TrainingDiverged on a non-finite loss or gradient norm (before that update).
 */
async function epochSteps(
  run: TrainingRun,
  epoch: number,
  rng: SeededRng,
  output: EpochOutput,
): Promise<EpochSteps> {
  const { dataset, state, kind } = run;
  const { progress, record } = output;
  const jasmin = state.jasmin as JasminSettings;
  const order = shuffledOrder(dataset.train.count, rng);
  progress.startEpoch(epoch, state.epochs, batchCount(state.data.trainCount, state.batchSize));
  let epochSeconds = 0;
  let seen = 0;
  let done = 0;
  const sums = { loss: 0, ce: 0, jasmin: 0, sigma: 0, correct: 0 };
  let lr = 0;
  for (const plain of kind.batches(dataset.train, order, state.batchSize)) {
    const batch =
      state.augment !== undefined && kind.augment !== undefined
        ? kind.augment(plain, state.augment, rng, dataset)
        : plain;
    lr = learningRateAt(state.step, state.optimizer);
    const t0 = performance.now();
    const m = await output.stepper.step(batch, { lr, clip: state.optimizer.clip, jasmin });
    const dt = (performance.now() - t0) / 1000;
    if (!m.finite) throw divergedStep(run, epoch, m, lr);
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
    progress.update(done, {
      loss: sums.loss / seen,
      accuracy: sums.correct / seen,
      imagesPerSecond: seen / epochSeconds,
      // Throughput in the data's own unit: images for a ViT, examples (texts) for a text model.
      unit: kind.rateUnit,
    });
  }
  progress.endEpoch();
  return { seen, seconds: epochSeconds, sums, lr };
}

/**
 * The test split's accuracy and cross-entropy after epoch `epoch` (null without a test split).
 *
 * @throws TrainingDiverged when the test cross-entropy is not finite (before saving).
 */
async function epochTest(
  run: TrainingRun,
  epoch: number,
  output: EpochOutput,
): Promise<Evaluation | null> {
  const { model, dataset, state, out, kind } = run;
  const evalOptions = { batchSize: output.evalBatchSize };
  const test =
    dataset.test.count === 0
      ? null
      : await evaluateBatchesYielding(
          model,
          kind.batches(dataset.test, null, evalOptions.batchSize ?? 250),
          "evaluate",
        );
  // Finite training steps can still leave weights whose test logits overflow (a huge
  // learning rate): stop before saving them, keeping the previous epoch's checkpoint.
  if (test !== null && !Number.isFinite(test.crossEntropy))
    throw new TrainingDiverged(
      `training diverged in epoch ${epoch}: the test cross-entropy is ${test.crossEntropy} (the model's outputs overflow; ` +
        `try a lower --lr); ${out !== null && state.epoch > 0 ? `the checkpoint of epoch ${state.epoch} in ${out} is intact` : "nothing was saved for this epoch"}`,
      epoch,
      state.step,
    );
  return test;
}

/**
 * Runs epoch `epoch` of a run: a permutation of the training split from the shuffling stream
 * `rng`, batches of state.batchSize (the last one smaller), one {@link trainStep} each (with
 * the scheduled learning rate), then evaluation on the test split, the epoch's summary in
 * state.history, and a checkpoint in run.out. Advances run.state (step, epoch, RNG state,
 * training seconds).
 *
 * @throws TrainingDiverged on a non-finite loss or gradient norm (before that update) or test
 *   cross-entropy (before saving); the previous checkpoint stays intact.
 */
export async function trainEpoch(
  run: TrainingRun,
  epoch: number,
  rng: SeededRng,
  output: EpochOutput,
): Promise<EpochResult> {
  const { model, optimizer, dataset, state, out, kind } = run;
  const { progress, record } = output;
  const epochStart = performance.now();
  const { seen, seconds: epochSeconds, sums, lr } = await epochSteps(run, epoch, rng, output);
  state.trainSeconds += epochSeconds;
  const test = await epochTest(run, epoch, output);
  const summary = {
    epoch,
    step: state.step,
    testAccuracy: test?.accuracy ?? null,
    testCrossEntropy: test?.crossEntropy ?? null,
    trainLoss: mean(sums.loss, seen),
    trainAccuracy: mean(sums.correct, seen),
    meanSigma: mean(sums.sigma, seen),
    seconds: epochSeconds,
    ...(output.stepper.workers > 1 ? { workers: output.stepper.workers } : {}),
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
    workers: output.stepper.workers,
  });
  if (out !== null)
    await saveCheckpoint(out, {
      model,
      optimizer,
      state,
      tokenizer: kind.tokenizer(dataset),
      trainingInputs: run.trainingInputs,
      hfConfig: run.hfConfig,
    });
  const testText =
    test === null
      ? "no test set"
      : `test accuracy ${(100 * test.accuracy).toFixed(2)}%, test cross-entropy ${test.crossEntropy.toFixed(4)}`;
  progress.log(
    `epoch ${epoch}/${state.epochs}: ${testText}, train loss ${summary.trainLoss.toFixed(4)}, ` +
      `train accuracy ${(100 * summary.trainAccuracy).toFixed(2)}%, mean sigma ${summary.meanSigma.toFixed(4)}, ` +
      `${epochSeconds.toFixed(1)} s (${(seen / epochSeconds).toFixed(1)} ${kind.rateUnit}${output.stepper.workers > 1 ? ` on ${output.stepper.workers} workers` : ""}), ` +
      `${((performance.now() - epochStart) / 1000).toFixed(1)} s with evaluation${out !== null ? ", checkpoint saved" : ""}`,
  );
  return {
    summary,
    seen,
    seconds: epochSeconds,
    testAccuracy: test?.accuracy ?? NaN,
    testCrossEntropy: test?.crossEntropy ?? NaN,
  };
}
