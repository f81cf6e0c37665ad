import { tf } from "../backend.ts";
import type { TransformerClassifier } from "../nn/model.ts";
import { imageBatch, lossGradient, type InputBatch } from "./inputSpace.ts";
import {
  checkGradient,
  checkInputs,
  labelTensor,
  reportNonFiniteGradient,
  reportZeroGradient,
  type Labels,
  type ZeroGradientFn,
} from "./loss.ts";
import { resolveAttackOptions, type AttackSettings } from "./options.ts";
import type { AttackContext, AttackSpec } from "./registry.ts";
import { pgdStepL2, pgdStepLinf } from "./steps.ts";

/** Options of {@link fgsm}. Defaults in brackets. */
export interface FgsmOptions extends Pick<AttackSettings, "eps" | "norm" | "clip"> {
  /** Where the warning goes when an example's gradient is exactly zero (any norm) [console.warn]. */
  onWarning?: (message: string) => void;
  /** Gets the per-example flags [b]: 1 where the gradient at x is exactly zero. */
  onZeroGradient?: ZeroGradientFn;
  /** Gets the per-example flags [b]: 1 where a gradient entry at x is NaN or infinite (set to 0 for the step). */
  onNonFiniteGradient?: ZeroGradientFn;
}

/**
 * The fast gradient sign method (Goodfellow, Shlens and Szegedy 2015, "Explaining and
 * Harnessing Adversarial Examples", ICLR), untargeted, in input space: one step
 * x_adv = clip(x + eps * sign(grad_x CE(f(x), y))) on the cross-entropy of the TRUE label,
 * model in inference mode. norm "l2" takes the one-step l_2 analogue (the fast gradient
 * method, e.g. cleverhans' fast_gradient_method with norm 2): x + eps * g / ||g||_2 per
 * example, clipped. An example whose gradient is exactly zero is left unchanged, in either
 * norm; the call then warns once and flags it (options.onZeroGradient): its robust accuracy
 * would be a sign of gradient masking. Clipping only moves entries towards x, so x_adv stays
 * in the eps-ball.
 *
 * @param model a ViT (any TransformerClassifier whose input is x).
 * @param x float32 images [b, H, W, C] or [b, H*W*C] inside the clip range ([0, 1]).
 * @param labels true classes [b].
 * @returns adversarial inputs, float32, x's shape (caller disposes). eps 0 returns x exactly.
 * @throws RangeError on eps < 0 / non-finite or larger than the clip range allows (l_inf:
 *   its width, e.g. 8 on [0, 1]; l_2: its diameter), a bad norm or clip, labels of the wrong
 *   length or range, inputs outside the clip range; TypeError when x is not float32.
 * @example fgsm(model, images, labels, { eps: 8 / 255 }) // not eps: 8 (refused on [0, 1])
 * @see FGSM_ATTACK, the registered attack, and {@link fgsmIn} for any input space.
 */
export function fgsm(
  model: TransformerClassifier,
  x: tf.Tensor,
  labels: Labels,
  options: FgsmOptions,
): tf.Tensor {
  const resolved = resolveAttackOptions(
    { eps: options.eps, norm: options.norm, clip: options.clip, steps: 1 },
    "fgsm",
    x.shape,
  );
  const { clip } = resolved;
  checkInputs(x, clip, "fgsm");
  const y = labelTensor(labels, x.shape[0] as number, model.config.classes, "fgsm");
  try {
    const batch: InputBatch = imageBatch(model, x, clip);
    return fgsmIn({
      batch,
      kind: "image",
      labels: y,
      settings: resolved,
      who: "fgsm",
      onWarning: options.onWarning,
      onZeroGradient: options.onZeroGradient,
      onNonFiniteGradient: options.onNonFiniteGradient,
    });
  } finally {
    y.dispose();
  }
}

/**
 * FGSM in any input space: one step of size eps on the loss gradient at the clean point
 * (l_inf: its sign; l_2: normalised per example), masked where the batch may not move and
 * clipped to its range. An example whose gradient is exactly zero is left unchanged and
 * flagged (one warning, context.onZeroGradient); a NaN or infinite gradient entry is set to 0
 * for the step and its example flagged (context.onNonFiniteGradient).
 *
 * @returns adversarial inputs, float32, batch.x's shape (caller disposes).
 * @example fgsmIn({ batch: imageBatch(model, x, [0, 1]), kind: "image", labels: y, settings: resolveAttackOptions({ eps: 0.1, steps: 1 }, "me"), who: "fgsm" })
 */
export function fgsmIn(context: AttackContext): tf.Tensor {
  const { batch, labels, who } = context;
  const { norm, eps } = context.settings;
  const x = batch.x;
  const zero = new Uint8Array(batch.size);
  const nonFinite = new Uint8Array(batch.size);
  const g = checkGradient(lossGradient(batch, labels)(x), zero, nonFinite);
  try {
    reportZeroGradient(zero, who, norm, "at the clean input", context);
    reportNonFiniteGradient(nonFinite, who, norm, context);
    return norm === "linf"
      ? pgdStepLinf(x, x, g, eps, eps, batch.clip)
      : pgdStepL2(x, x, g, eps, eps, batch.clip);
  } finally {
    g.dispose();
  }
}

/**
 * FGSM: the fast gradient sign method, untargeted.
 *
 * Paper: Goodfellow, Shlens and Szegedy 2015, "Explaining and Harnessing Adversarial
 * Examples", ICLR. Norm: l_inf (x + eps sign(g)) or l_2 (the fast gradient method,
 * x + eps g / ||g||_2 per example, as cleverhans' fast_gradient_method with norm 2), g the
 * gradient of the cross-entropy of the TRUE label at x, model in inference mode.
 * Arguments: eps (radius, >= 0, input units), norm ["linf"]; no other setting.
 * Input range: images in the clip range ([0, 1]), the result clipped to it; token embeddings
 * unbounded (no clipping), padding rows never moved.
 * Shapes: x float32 [b, ...] (images [b, H, W, C] or [b, H*W*C]; embeddings [b, n, d]),
 * labels [b]; returns x's shape.
 */
export const FGSM_ATTACK: AttackSpec = {
  name: "fgsm",
  label: "FGSM",
  summary: "one step of size eps along the sign (l_inf) or the normalised gradient (l_2)",
  options: {},
  run: fgsmIn,
};
