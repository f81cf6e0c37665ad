import { tf } from "../backend.ts";
import type { TransformerClassifier } from "../nn/model.ts";
import {
  checkClip,
  checkInputs,
  crossEntropyGradient,
  inferenceLogits,
  labelTensor,
  type ClipRange,
  type Labels,
} from "./loss.ts";
import { ATTACK_NORMS, type AttackNorm } from "./pgd.ts";
import { pgdStepL2, pgdStepLinf } from "./steps.ts";

/** Options of {@link fgsm}. Defaults in brackets. */
export interface FgsmOptions {
  /** Radius, >= 0, in input units (pixels in [0, 1]). */
  eps: number;
  /** Threat model ["linf"]; "l2" is the fast gradient method (normalised gradient). */
  norm?: AttackNorm;
  /** Valid input range [[0, 1]]. */
  clip?: ClipRange;
  /** Where the warning goes when an l_2 gradient is exactly zero [console.warn]. */
  onWarning?: (message: string) => void;
}

/**
 * The fast gradient sign method (Goodfellow, Shlens and Szegedy 2015, "Explaining and
 * Harnessing Adversarial Examples", ICLR), untargeted, in input space: one step
 * x_adv = clip(x + eps * sign(grad_x CE(f(x), y))) on the cross-entropy of the TRUE label,
 * model in inference mode. norm "l2" takes the one-step l_2 analogue (the fast gradient
 * method, e.g. cleverhans' fast_gradient_method with norm 2): x + eps * g / ||g||_2 per
 * example, clipped; an example with an exactly zero gradient is left unchanged (one warning).
 * Clipping only moves entries towards x, so x_adv stays in the eps-ball.
 *
 * @param model a ViT (any TransformerClassifier whose input is x).
 * @param x float32 images [b, H, W, C] or [b, H*W*C] inside the clip range ([0, 1]).
 * @param labels true classes [b].
 * @returns adversarial inputs, float32, x's shape (caller disposes). eps 0 returns x exactly.
 * @throws RangeError on eps < 0 / non-finite, a bad norm or clip, labels of the wrong length
 *   or range, inputs outside the clip range; TypeError when x is not float32.
 */
export function fgsm(
  model: TransformerClassifier,
  x: tf.Tensor,
  labels: Labels,
  options: FgsmOptions,
): tf.Tensor {
  const { eps } = options;
  const norm = options.norm ?? "linf";
  const clip = options.clip ?? ([0, 1] as const);
  if (typeof eps !== "number" || !Number.isFinite(eps) || eps < 0)
    throw new RangeError(`fgsm: eps must be a finite number >= 0, got ${eps}`);
  if (!ATTACK_NORMS.includes(norm))
    throw new RangeError(`fgsm: norm must be linf or l2, got ${String(norm)}`);
  checkClip(clip, "fgsm");
  checkInputs(x, clip, "fgsm");
  const y = labelTensor(labels, x.shape[0] as number, model.config.classes, "fgsm");
  const g = crossEntropyGradient(inferenceLogits(model), y)(x);
  y.dispose();
  try {
    if (norm === "linf") return pgdStepLinf(x, x, g, eps, eps, clip);
    const warn = options.onWarning ?? ((m: string) => console.warn(m));
    return pgdStepL2(x, x, g, eps, eps, clip, (count) =>
      warn(
        `fgsm: the loss gradient is exactly zero for ${count} example(s); they are left unchanged`,
      ),
    );
  } finally {
    g.dispose();
  }
}
