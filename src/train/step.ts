import { tf } from "../backend.ts";
import type { Model } from "../nn/create.ts";
import { disposeTrace, type ForwardTrace } from "../nn/trace.ts";
import { jasminPenalty, meanTraceSigma, type JasminNorm, type JasminReduce } from "./jasmin.ts";
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
        const { logits, trace } = model.forward(x, {
          trace: true,
          training: true,
          mask: settings.mask ?? null,
        });
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
      const values = tf
        .concat([kept[0], tf.reshape(value, [1]), tf.reshape(gradNorm, [1])])
        .dataSync();
      const [ce, reg, sigma, correct, loss, gn] = values;
      const finite = Number.isFinite(loss) && Number.isFinite(gn);
      if (finite) optimizer.apply(clipped, settings.lr);
      return {
        loss,
        crossEntropy: ce,
        jasmin: reg,
        meanSigma: sigma,
        correct,
        gradNorm: gn,
        finite,
      };
    });
  } finally {
    for (const t of kept) t.dispose();
    for (const t of traces) disposeTrace(t);
  }
}
