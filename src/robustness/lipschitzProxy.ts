import { tf } from "../backend.ts";
import type { TransformerClassifier } from "../nn/model.ts";
import { imageSpace, type InputSpace } from "./inputSpace.ts";
import { checkLogitRows, labelTensor, type Labels } from "./loss.ts";

/** Options of {@link lipschitzProxy}. */
export interface LipschitzProxyOptions {
  /** Examples per forward pass for the margins [64]. */
  batchSize?: number;
  /** Examples per Jacobian backward pass (networkLipschitz) [8]. */
  examplesPerPass?: number;
}

/** Per-example figures of {@link lipschitzProxy}, each Float64Array [n]. */
export interface LipschitzProxy {
  /** margin / (sqrt(2) L), l_2 in input units; 0 where the example is misclassified (margin <= 0). */
  radii: Float64Array;
  /** logit of the true class minus the largest other logit (negative when misclassified). */
  margins: Float64Array;
  /** L: the exact spectral norm of the logits' input Jacobian at the example. */
  lipschitz: Float64Array;
  /** Examples with margin <= 0 (radius reported as 0). */
  misclassified: number;
}

/**
 * The Lipschitz-based robustness radius of each example (docs/math.md section 5):
 * r = margin / (sqrt(2) L), margin = z_y - max_{j != y} z_j (logits z, true class y), and L the
 * EXACT local Lipschitz constant of the logits at the example (networkLipschitz: the largest
 * singular value of the input Jacobian). If L bounded the Jacobian on the whole l_2 ball of
 * radius r, no perturbation inside it could change the prediction (z_y - z_j is sqrt(2)
 * L-Lipschitz). L is measured at the point only, so r is the certified radius of the local
 * linearisation: a PROXY, not a certificate (a real attack may succeed inside it).
 * Misclassified examples (margin <= 0) get radius 0 and are counted in `misclassified`.
 * A margin > 0 with L = 0 (a locally constant network) gives Infinity. A logit of -Infinity
 * (a class the model rules out) is allowed: that class never sets the margin, a row whose only
 * live class is the true one has margin and radius Infinity, and a true class at -Infinity is
 * misclassified (margin -Infinity, radius 0); NaN, +Infinity or an all -Infinity row is refused.
 *
 * This is {@link lipschitzProxyIn} on {@link imageSpace} (inputs in [0, 1]).
 *
 * @param model a ViT in inference mode.
 * @param x float32 images [n, H, W, C] or [n, H*W*C] in [0, 1]; not disposed.
 * @param labels true classes [n].
 * @returns per-example radii (l_2, input units), margins and L; leaves numTensors unchanged.
 * @throws RangeError on labels of the wrong length or range, inputs outside [0, 1], a bad
 *   batch size, or a non-ViT model (networkLipschitz's input space is the image here);
 *   TypeError on non-float32 inputs; InputError on logits that define no class distribution.
 * @example lipschitzProxy(model, images, labels).radii // Float64Array [n]
 */
export function lipschitzProxy(
  model: TransformerClassifier,
  x: tf.Tensor,
  labels: Labels,
  options: LipschitzProxyOptions = {},
): LipschitzProxy {
  if (model.config.kind !== "vit")
    throw new RangeError("lipschitzProxy: input-space radii need a ViT");
  return lipschitzProxyIn(imageSpace(model, x, [0, 1]), labels, options, "lipschitzProxy");
}

/**
 * The Lipschitz proxy radius r = margin / (sqrt(2) L) of each example of any
 * {@link InputSpace} (see {@link lipschitzProxy}): margins from the clean logits in batches of
 * options.batchSize, L from space.localLipschitz (l_2, in the space's units: pixels or
 * embedding units).
 *
 * @param who the caller's name in messages.
 * @returns radii, margins, L and the misclassified count; leaves numTensors unchanged.
 * @throws RangeError on a bad batch size, labels of the wrong length or range, or inputs the
 *   space refuses.
 * @example lipschitzProxyIn(embeddingSpace(model, { ids, mask }), labels).radii
 */
export function lipschitzProxyIn(
  space: InputSpace,
  labels: Labels,
  options: LipschitzProxyOptions = {},
  who = "lipschitzProxyIn",
): LipschitzProxy {
  const batchSize = options.batchSize ?? 64;
  if (!Number.isInteger(batchSize) || batchSize < 1)
    throw new RangeError(`${who}: batchSize must be an integer >= 1, got ${batchSize}`);
  space.check(who);
  const n = space.count;
  const y = labelTensor(labels, n, space.classes, who);
  const truth = y.dataSync();
  y.dispose();
  const c = space.classes;
  const margins = new Float64Array(n);
  for (let start = 0; start < n; start += batchSize) {
    const size = Math.min(batchSize, n - start);
    const batch = space.batch(start, size);
    try {
      const z = tf.tidy(() => batch.cleanLogits());
      const data = z.dataSync();
      z.dispose();
      writeMargins(data, c, truth, start, size, margins);
    } finally {
      batch.dispose();
    }
  }
  const lipschitz = space.localLipschitz({ batchSize, examplesPerPass: options.examplesPerPass });
  return proxyFromMargins(margins, lipschitz);
}

/**
 * Writes margin = logit of the true class - largest other logit for `size` rows of a
 * row-major [size, classes] logits array into margins[start ..]. A logit of -Infinity (a class
 * the model rules out) is allowed: when every other class is -Infinity the margin is +Infinity
 * (no perturbation can change the prediction), and when the true class is -Infinity it is
 * -Infinity (misclassified); never NaN.
 *
 * @throws InputError when a row holds NaN or +Infinity or is -Infinity for every class
 *   (checkLogitRows).
 * @example writeMargins([2, -Infinity, 0], 3, [0], 0, 1, m) // m[0] = 2
 */
export function writeMargins(
  logits: ArrayLike<number>,
  classes: number,
  truth: ArrayLike<number>,
  start: number,
  size: number,
  margins: Float64Array,
): void {
  checkLogitRows(logits, classes, size);
  for (let i = 0; i < size; i++) {
    const t = truth[start + i];
    let other = -Infinity;
    for (let k = 0; k < classes; k++)
      if (k !== t && logits[i * classes + k] > other) other = logits[i * classes + k];
    margins[start + i] = logits[i * classes + t] - other;
  }
}

/**
 * Radii margin / (sqrt(2) L) from margins and local Lipschitz constants (both [n]); a
 * misclassified example (margin <= 0) gets radius 0 and is counted.
 */
export function proxyFromMargins(margins: Float64Array, lipschitz: Float64Array): LipschitzProxy {
  const radii = new Float64Array(margins.length);
  let misclassified = 0;
  for (let i = 0; i < margins.length; i++) {
    if (margins[i] <= 0) {
      misclassified++;
      radii[i] = 0;
    } else radii[i] = margins[i] / (Math.SQRT2 * lipschitz[i]);
  }
  return { radii, margins, lipschitz, misclassified };
}
