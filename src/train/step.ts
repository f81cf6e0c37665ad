import { tf } from "../backend.ts";
import type { Model } from "../nn/create.ts";
import { disposeTrace, type ForwardTrace } from "../nn/trace.ts";
import { jasminPenalty, meanTraceSigma, type BatchTotals, type JasminNorm, type JasminReduce } from "./jasmin.ts";
import { crossEntropy } from "./loss.ts";
import { AdamW, clipByGlobalNorm } from "./optimizer.ts";

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
 * add up to the whole batch's (data-parallel training, parallel/trainTask.ts). Call inside
 * tf.tidy: the returned tensors belong to it.
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
      const reg = lambda > 0 ? jasminPenalty(trace!, jasmin) : tf.scalar(0);
      const sigma = meanTraceSigma(trace!, norm, totals);
      const correct = tf.sum(tf.cast(tf.equal(tf.argMax(logits, 1), labels), "float32"));
      // Kept past variableGrads' own tidy; freed in `finally`.
      kept.push(tf.keep(tf.stack([ce, reg, sigma, correct])));
      return (lambda > 0 ? tf.add(ce, tf.mul(reg, lambda)) : tf.add(ce, 0)) as tf.Scalar;
    }, vars);
    return { grads: vars.map((v) => grads[v.name]), figures: tf.concat([kept[0], tf.reshape(value, [1])]) };
  } finally {
    for (const t of kept) t.dispose();
    for (const t of traces) disposeTrace(t);
  }
}

/**
 * One training step on a batch: forward with attention trace (training mode), cross-entropy +
 * lambda * JaSMin ({@link lossGradients}), gradients of every model variable, and
 * {@link applyGradients}. Everything runs inside tidy: tf.memory().numTensors is the same
 * before and after.
 *
 * @param x float32 images [b, pixels] (or any shape the model accepts), or int32 token ids
 *   [b, n] with settings.mask float32 [b, n] (1 = real token); labels int32 [b].
 * @returns the step's figures (read back with one synchronisation).
 * @throws RangeError/TypeError from the model on malformed inputs.
 * @example const m = trainStep(model, optimizer, x, y, { lr: 1e-3, clip: 1, jasmin }); m.loss
 */
export function trainStep(
  model: Model,
  optimizer: AdamW,
  x: tf.Tensor,
  labels: tf.Tensor,
  settings: { lr: number; clip: number; jasmin: JasminSettings; mask?: tf.Tensor | null },
): StepMetrics {
  return tf.tidy(() => {
    const { grads, figures } = lossGradients(model, x, labels, settings);
    return applyGradients(optimizer, grads, figures.dataSync(), settings);
  });
}

/**
 * Clips gradients by their global norm and applies the AdamW update with learning rate `lr`,
 * only when the loss and the gradient norm are finite. Call inside tf.tidy.
 *
 * @param grads one per model.variables() entry, in that order.
 * @param figures cross-entropy, JaSMin R, mean sigma, correct predictions and loss of the
 *   batch ({@link lossGradients}'s figures, or the sum of its slices').
 * @returns the step's figures.
 * @example tf.tidy(() => applyGradients(optimizer, grads, [ce, reg, sigma, correct, loss], { lr: 1e-3, clip: 1 }))
 */
export function applyGradients(
  optimizer: AdamW,
  grads: tf.Tensor[],
  figures: ArrayLike<number>,
  settings: { lr: number; clip: number },
): StepMetrics {
  const { clipped, norm } = clipByGlobalNorm(grads, settings.clip);
  const gn = norm.dataSync()[0];
  const [ce, reg, sigma, correct, loss] = Array.from(figures);
  const finite = Number.isFinite(loss) && Number.isFinite(gn);
  if (finite) optimizer.apply(clipped, settings.lr);
  return { loss, crossEntropy: ce, jasmin: reg, meanSigma: sigma, correct, gradNorm: gn, finite };
}
