import { AttackTally, resolveAttacks } from "./tally.ts";
import { tf } from "../backend.ts";
import type { TransformerClassifier } from "../nn/model.ts";
import { fgsm } from "./fgsm.ts";
import {
  checkInputs,
  inferenceLogits,
  labelTensor,
  predictClasses,
  type ClipRange,
  type Labels,
} from "./loss.ts";
import { checkCount, defaultStepSize, resolveAttackOptions, type AttackNorm } from "./options.ts";
import { pgd } from "./pgd.ts";

/** The attacks {@link evaluateRobustness} runs. */
export type AttackName = "fgsm" | "pgd";

/** Options of {@link evaluateRobustness}. Defaults in brackets. */
export interface EvaluateRobustnessOptions {
  /** Which attacks to run, one or several [["fgsm", "pgd"]]. */
  attack?: AttackName | readonly AttackName[];
  /** Threat model of both attacks ["linf"]. */
  norm?: AttackNorm;
  /**
   * Radii to evaluate, each finite and >= 0 (input units) and at most the clip range's width
   * (l_inf) or diameter (l_2); 0 gives the clean accuracy.
   */
  eps: readonly number[];
  /** PGD steps [10]. */
  steps?: number;
  /** PGD step size; null/undefined = 2.5 * eps / steps for each eps. */
  stepSize?: number | null;
  /** PGD random start [true]. */
  randomStart?: boolean;
  /** Examples per forward/backward pass [32]. */
  batchSize?: number;
  /** Seed of the PGD random starts (each batch and eps gets its own stream from it) [0]. */
  seed?: number;
  /** Valid input range [[0, 1]]. */
  clip?: ClipRange;
  /** Called after each (batch, eps, attack) with (done, total) such units. */
  onProgress?: (done: number, total: number) => void;
  /** Where a warning goes (at most once per call) [console.warn]. */
  onWarning?: (message: string) => void;
}

/** One attack at one radius. */
export interface AttackOutcome {
  /** Fraction of ALL examples classified correctly both clean and under attack, in [0, 1]. */
  robustAccuracy: number;
  /** Per example [n]: 1 when the example was correct clean and the attack made it wrong. */
  success: Uint8Array;
  /**
   * Per example [n]: 1 when the loss gradient with respect to the input was exactly zero
   * where the attack looked (FGSM: at x; PGD: at one or more steps). All 0 at eps 0.
   */
  zeroGradient: Uint8Array;
  /**
   * Fraction of ALL examples flagged in zeroGradient, in [0, 1]; null at eps 0 (no attack
   * ran). Above 0, the robust accuracy of those examples reflects gradient masking (the
   * attack had no direction), not robustness.
   */
  zeroGradientFraction: number | null;
}

/** Results at one radius; an attack not run is absent. */
export interface RobustnessAtEps {
  eps: number;
  /** The PGD step size used at this eps (the default rule or the given one). */
  stepSize: number;
  fgsm?: AttackOutcome;
  pgd?: AttackOutcome;
}

/** What {@link evaluateRobustness} returns. */
export interface RobustnessEvaluation {
  /** Examples evaluated. */
  count: number;
  /** Fraction classified correctly without attack, in [0, 1]. */
  cleanAccuracy: number;
  /** Per example [n]: 1 when classified correctly without attack. */
  cleanCorrect: Uint8Array;
  /** One entry per eps, in the order given. */
  results: RobustnessAtEps[];
  /** Wall time, seconds. */
  seconds: number;
}

/** A stream seed for (seed, eps index, batch index), so each batch's random start differs. */
function streamSeed(seed: number, epsIndex: number, batchIndex: number): number {
  return (seed ^ Math.imul(epsIndex + 1, 0x85ebca6b) ^ Math.imul(batchIndex + 1, 0x9e3779b1)) >>> 0;
}

/**
 * Clean and robust accuracy of a classifier under FGSM and/or PGD (docs/math.md section 5), model
 * in inference mode, loss = cross-entropy on the true label. An example counts as robust at
 * eps when it is classified correctly clean AND on the adversarial input, so robust accuracy
 * <= clean accuracy, and eps 0 (no attack run) gives the clean accuracy exactly. Examples are
 * processed in batches; PGD's random start of batch j at eps i is seeded from (seed, i, j).
 * Each attack also flags the examples whose input gradient was exactly zero
 * (AttackOutcome.zeroGradient, zeroGradientFraction) and warns once when there are any.
 *
 * @param model a ViT (TransformerClassifier taking `images`).
 * @param images float32 [n, H, W, C] or [n, H*W*C] inside the clip range ([0, 1]); not disposed.
 * @param labels true classes [n].
 * @returns clean accuracy, per-eps robust accuracy and per-example success; leaves
 *   tf.memory().numTensors unchanged.
 * @throws RangeError on an empty eps list, a bad eps (negative, non-finite, larger than the
 *   clip range's width in l_inf or its diameter in l_2), steps, step size, batch size, attack
 *   name, clip range, labels, or inputs outside the range; TypeError on non-float32 inputs.
 * @example evaluateRobustness(model, images, labels, { eps: [0, 2 / 255, 8 / 255] })
 */
export function evaluateRobustness(
  model: TransformerClassifier,
  images: tf.Tensor,
  labels: Labels,
  options: EvaluateRobustnessOptions,
): RobustnessEvaluation {
  const who = "evaluateRobustness";
  const attacks = resolveAttacks(options, who);
  const common = options.eps.map((eps) =>
    resolveAttackOptions({ ...options, eps, stepSize: options.stepSize ?? undefined }, who, images.shape),
  );
  const clip = common[0].clip;
  const batchSize = checkCount(options.batchSize ?? 32, "batchSize", who);
  checkInputs(images, clip, who);
  const n = images.shape[0] as number;
  const y = labelTensor(labels, n, model.config.classes, who);
  const truth = Int32Array.from(y.dataSync());
  y.dispose();

  const logits = inferenceLogits(model);
  const batches = Math.ceil(n / batchSize);
  const tally = new AttackTally(n, options.eps, attacks, batches, options.onProgress, options.onWarning);
  for (let j = 0; j < batches; j++) {
    const start = j * batchSize;
    const size = Math.min(batchSize, n - start);
    const x = tf.slice(images, [start], [size]);
    try {
      const batchLabels = truth.subarray(start, start + size);
      tally.recordBatch(
        start,
        batchLabels,
        predictClasses(logits, x),
        (adversarial) => predictClasses(logits, adversarial),
        (attack, e, eps, onZeroGradient) =>
          attack === "fgsm"
            ? fgsm(model, x, batchLabels, { eps, norm: common[e].norm, clip, onWarning: tally.warnOnce, onZeroGradient })
            : pgd(model, x, batchLabels, {
                ...common[e],
                seed: streamSeed(common[e].seed, e, j),
                onWarning: tally.warnOnce,
                onZeroGradient,
              }),
      );
    } finally {
      x.dispose();
    }
  }
  return tally.result((eps, e) => options.stepSize ?? defaultStepSize(eps, common[e].steps));
}
