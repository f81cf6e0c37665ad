import { tf } from "../backend.ts";
import type { Model } from "../nn/create.ts";
import {
  attentionProbabilities,
  disposeTrace,
  traceTensors,
  type ForwardTrace,
} from "../nn/trace.ts";
import {
  batchTotals,
  jasminWithMeanSigma,
  meanTraceSigma,
  type BatchTotals,
  type JasminNorm,
  type JasminReduce,
} from "./jasmin.ts";
import { crossEntropy } from "./loss.ts";
import { microBatchFor } from "./memory.ts";
import { AdamW, clipFactor, globalGradNorm } from "./optimizer.ts";

/**
 * One optimizer step: cross-entropy + lambda * JaSMin (docs/math.md section 4), gradients,
 * clipping and the AdamW update.
 */

/** JaSMin settings of a run. */
export interface JasminSettings {
  /** Weight lambda of the penalty (0: off; meanSigma is still reported). */
  lambda: number;
  norm: JasminNorm;
  reduce: JasminReduce;
  /** Block indices, or null for all. */
  layers: number[] | null;
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

/**
 * Gradients of the training loss on a batch, cross-entropy + lambda * JaSMin (docs/math.md
 * section 4), with its figures. Without `totals` the loss is the batch's mean; with them, x is
 * a slice of a larger batch and everything is this slice's share of the whole batch's value
 * (the cross-entropy summed and divided by totals.examples, JaSMin's and sigma's means divided
 * by the whole batch's counts), so that the shares of a batch's slices, and their gradients,
 * add up to the whole batch's (data-parallel training, parallel/trainTask.ts, and the
 * micro-batches of {@link trainStep}). Call inside tf.tidy: the returned tensors belong to it.
 *
 * Memory: the trace's tensors are freed as soon as the loss is computed (the gradient tape
 * keeps its own copies of what the backward pass needs), the per-row sigma of each attention
 * layer is computed once for both JaSMin and the mean sigma, and with lambda = 0 the mean
 * sigma is computed after the backward pass, off the tape, from the attention probabilities.
 *
 * @param x, labels, mask as {@link trainStep}.
 * @returns one gradient per model.variables() entry, in that order, and figures float32 [5]:
 *   cross-entropy, JaSMin R (0 when lambda = 0), mean sigma, correct predictions, loss.
 * @throws RangeError/TypeError from the model on malformed inputs.
 * @example const { grads, figures } = tf.tidy(() => lossGradients(model, x, y, { jasmin }));
 */
export function lossGradients(
  model: Model,
  x: tf.Tensor,
  labels: tf.Tensor,
  settings: { jasmin: JasminSettings; mask?: tf.Tensor | null; totals?: BatchTotals },
): { grads: tf.Tensor[]; figures: tf.Tensor } {
  const vars = model.variables();
  const { lambda, norm } = settings.jasmin;
  const totals = settings.totals;
  const kept: tf.Tensor[] = [];
  const traces: ForwardTrace[] = [];
  try {
    const { value, grads } = tf.variableGrads(() => {
      const { logits, trace } = model.forward(x, {
        trace: true,
        training: true,
        mask: settings.mask ?? null,
      });
      traces.push(trace!);
      const ce =
        totals === undefined
          ? crossEntropy(logits, labels, "mean", "trainStep")
          : tf.div(crossEntropy(logits, labels, "sum", "trainStep"), totals.examples);
      const jasmin = totals === undefined ? settings.jasmin : { ...settings.jasmin, totals };
      const correct = tf.sum(tf.cast(tf.equal(tf.argMax(logits, 1), labels), "float32"));
      let reg: tf.Tensor;
      // With lambda = 0 the probabilities (and the mask) are kept for the mean sigma, computed
      // after the backward pass; every other tensor of the trace is freed here.
      const later = new Set<tf.Tensor>();
      if (lambda > 0) {
        const { penalty, meanSigma } = jasminWithMeanSigma(trace!, jasmin);
        reg = penalty;
        kept.push(tf.keep(meanSigma));
      } else {
        reg = tf.scalar(0);
        for (const p of attentionProbabilities(trace!)) later.add(p);
        if (trace!.mask !== null) later.add(trace!.mask);
      }
      for (const t of traceTensors(trace!)) if (!later.has(t)) t.dispose();
      // Kept past variableGrads' own tidy; freed in `finally`.
      kept.unshift(tf.keep(ce), tf.keep(reg), tf.keep(correct));
      return (lambda > 0 ? tf.add(ce, tf.mul(reg, lambda)) : tf.add(ce, 0)) as tf.Scalar;
    }, vars);
    const [ce, reg, correct] = kept;
    const sigma = lambda > 0 ? kept[3] : meanTraceSigma(traces[0], norm, totals);
    return {
      grads: vars.map((v) => grads[v.name]),
      figures: tf.stack([ce, reg, sigma, correct, value]),
    };
  } finally {
    for (const t of kept) t.dispose();
    for (const t of traces) disposeTrace(t);
  }
}

/** Settings of {@link trainStep}. */
export interface TrainStepSettings {
  /** Learning rate. */
  lr: number;
  /** Global gradient-norm clip (0 or Infinity: off). */
  clip: number;
  jasmin: JasminSettings;
  /** Padding mask float32 [b, n] of token inputs (1 = real token), or null. */
  mask?: tf.Tensor | null;
  /**
   * Examples per forward and backward pass: a batch larger than this is cut into contiguous
   * micro-batches whose gradients are added up (gradient accumulation: the same step, up to the
   * float32 rounding of the sums, about 1e-7 relative). An integer >= 1; default
   * {@link microBatchFor}'s estimate of what the backend's memory holds (on wasm, whose heap
   * stops at 4 GB: the whole batch for small models, 1 or 2 examples for BERT-base at 128
   * tokens; on other backends the whole batch).
   */
  microBatch?: number;
}

/**
 * One training step on a batch: forward with attention trace (training mode), cross-entropy +
 * lambda * JaSMin ({@link lossGradients}), gradients of every model variable, and
 * {@link applyGradients}. A batch larger than settings.microBatch is computed in
 * micro-batches, each one's share of the loss ({@link lossGradients} with the batch's totals),
 * the gradients added up before the update. Everything runs inside tidy:
 * tf.memory().numTensors is the same before and after.
 *
 * @param x float32 images [b, pixels] (or any shape the model accepts), or int32 token ids
 *   [b, n] with settings.mask float32 [b, n] (1 = real token); labels int32 [b].
 * @returns the step's figures (read back with one synchronisation per micro-batch).
 * @throws RangeError when settings.microBatch is not an integer >= 1; RangeError/TypeError
 *   from the model on malformed inputs.
 * @example const m = trainStep(model, optimizer, x, y, { lr: 1e-3, clip: 1, jasmin }); m.loss
 */
export function trainStep(
  model: Model,
  optimizer: AdamW,
  x: tf.Tensor,
  labels: tf.Tensor,
  settings: TrainStepSettings,
): StepMetrics {
  return tf.tidy(() => {
    const { grads, figures } = batchGradients(model, x, labels, settings);
    return applyGradients(optimizer, grads, figures, settings);
  });
}

/**
 * The gradients and figures of a batch ({@link lossGradients}), in micro-batches of at most
 * settings.microBatch examples whose gradients are added up (default {@link microBatchFor}'s
 * estimate: the whole batch when it fits, which is then one lossGradients call, bit for bit).
 * Each micro-batch takes its share of the loss through the batch's totals: settings.totals when
 * the batch is itself a worker's slice of a larger one (src/parallel/trainTask.ts), else this
 * batch's own. Call inside tf.tidy.
 *
 * @param x, labels, settings.mask as {@link trainStep}.
 * @returns one gradient per model.variables() entry and the figures [5] of {@link lossGradients},
 *   summed over the micro-batches.
 * @throws RangeError when settings.microBatch is not an integer >= 1; as lossGradients.
 * @example const { grads, figures } = tf.tidy(() => batchGradients(model, x, y, { jasmin, microBatch: 2 }));
 */
export function batchGradients(
  model: Model,
  x: tf.Tensor,
  labels: tf.Tensor,
  settings: {
    jasmin: JasminSettings;
    mask?: tf.Tensor | null;
    totals?: BatchTotals;
    microBatch?: number;
  },
): { grads: tf.Tensor[]; figures: number[] } {
  const b = x.shape[0];
  const micro = settings.microBatch ?? microBatchFor(model, x);
  if (!Number.isInteger(micro) || micro < 1)
    throw new RangeError(`trainStep: microBatch must be an integer >= 1, got ${micro}`);
  const mask = settings.mask ?? null;
  if (micro >= b) {
    const { grads, figures } = lossGradients(model, x, labels, {
      jasmin: settings.jasmin,
      mask,
      totals: settings.totals,
    });
    return { grads, figures: Array.from(figures.dataSync()) };
  }
  const totals =
    settings.totals ??
    batchTotals(
      b,
      mask === null ? 0 : (mask.shape[1] as number),
      mask === null ? null : mask.dataSync(),
    );
  // ceil(b / micro) micro-batches of nearly equal sizes, none larger than micro.
  const parts = Math.ceil(b / micro);
  const size = Math.ceil(b / parts);
  let sum: tf.Tensor[] | null = null;
  const figures = [0, 0, 0, 0, 0];
  for (let start = 0; start < b; start += size) {
    const rows = Math.min(size, b - start);
    const part = tf.tidy(() =>
      lossGradients(model, tf.slice(x, start, rows), tf.slice(labels, start, rows), {
        jasmin: settings.jasmin,
        mask: mask === null ? null : tf.slice(mask, start, rows),
        totals,
      }),
    );
    part.figures.dataSync().forEach((v, i) => (figures[i] += v));
    part.figures.dispose();
    if (sum === null) sum = part.grads;
    else
      for (let i = 0; i < sum.length; i++) {
        const added = tf.add(sum[i], part.grads[i]);
        sum[i].dispose();
        part.grads[i].dispose();
        sum[i] = added;
      }
  }
  return { grads: sum!, figures };
}

/**
 * Clips gradients by their global norm and applies the AdamW update with learning rate `lr`,
 * only when the loss and the gradient norm are finite. Call inside tf.tidy. The clipping factor
 * is passed to AdamW.apply, which scales one gradient at a time (no clipped copy of every
 * gradient is held).
 *
 * @param grads one per model.variables() entry, in that order.
 * @param figures cross-entropy, JaSMin R, mean sigma, correct predictions and loss of the
 *   batch ({@link lossGradients}'s figures, or the sum of its slices').
 * @returns the step's figures.
 * @throws RangeError when settings.clip is negative or NaN.
 * @example tf.tidy(() => applyGradients(optimizer, grads, [ce, reg, sigma, correct, loss], { lr: 1e-3, clip: 1 }))
 */
export function applyGradients(
  optimizer: AdamW,
  grads: tf.Tensor[],
  figures: ArrayLike<number>,
  settings: { lr: number; clip: number },
): StepMetrics {
  return tf.tidy(() => {
    const norm = globalGradNorm(grads);
    const scale = clipFactor(norm, settings.clip);
    const gn = norm.dataSync()[0];
    const [ce, reg, sigma, correct, loss] = Array.from(figures);
    const finite = Number.isFinite(loss) && Number.isFinite(gn);
    if (finite) optimizer.apply(grads, settings.lr, scale ?? undefined);
    return { loss, crossEntropy: ce, jasmin: reg, meanSigma: sigma, correct, gradNorm: gn, finite };
  });
}
