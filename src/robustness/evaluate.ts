import { AttackTally, resolveAttacks } from "./tally.ts";
import type { AttackName, AttackOutcome, RobustnessAtEps, RobustnessEvaluation } from "./tally.ts";
import { tf } from "../backend.ts";
import type { TransformerClassifier } from "../nn/model.ts";
import { ATTACK_DEFAULTS } from "./defaults.ts";
import { attackWho, imageSpace, type InputSpace } from "./inputSpace.ts";
import { labelTensor, predictClasses, type ClipRange, type Labels } from "./loss.ts";
import { checkCount, defaultStepSize, resolveAttackOptions, type AttackNorm } from "./options.ts";
import { attackSpec } from "./attacks.ts";

export type { AttackName, AttackOutcome, RobustnessAtEps, RobustnessEvaluation };

/** Options of {@link evaluateRobustness} and {@link evaluateIn}. Defaults in brackets. */
export interface EvaluateRobustnessOptions {
  /** Which registered attacks to run, one or several [ATTACK_DEFAULTS.attacks: ["fgsm", "pgd"]]. */
  attack?: AttackName | readonly AttackName[];
  /** Threat model of every attack ["linf"]. */
  norm?: AttackNorm;
  /**
   * Radii to evaluate, each finite and >= 0 (input units) and at most the clip range's width
   * (l_inf) or diameter (l_2); 0 gives the clean accuracy.
   */
  eps: readonly number[];
  /** Steps of iterative attacks (PGD) [10]. */
  steps?: number;
  /** Step size of iterative attacks; null/undefined = 2.5 * eps / steps for each eps. */
  stepSize?: number | null;
  /** Random start of iterative attacks [true]. */
  randomStart?: boolean;
  /** Runs from new random starts of the attacks that restart (APGD) [1]. */
  restarts?: number;
  /** Examples per forward/backward pass [32]. */
  batchSize?: number;
  /** Seed of the random starts (each batch and eps gets its own stream from it) [0]. */
  seed?: number;
  /** Valid input range [[0, 1]] (images; ignored in embedding space, which has none). */
  clip?: ClipRange;
  /** Called after each (batch, eps, attack) with (done, total) such units. */
  onProgress?: (done: number, total: number) => void;
  /** Where a warning goes (at most once per call) [console.warn]. */
  onWarning?: (message: string) => void;
  /**
   * The index of the first batch among all batches of the evaluation these examples belong to
   * (a worker's slice of whole batches), so each batch keeps its random-start stream [0].
   */
  batchOffset?: number;
}

/**
 * The evaluation of consecutive slices of the examples (each from {@link evaluateIn} with its
 * batchOffset) as one: per-example flags concatenated in order, accuracies and zero-gradient
 * fractions over all examples, the first part's step sizes, the given wall time.
 *
 * @throws RangeError on no parts or parts with other radii or attacks.
 * @example joinEvaluations([first, second], 12.5).cleanAccuracy
 */
export function joinEvaluations(parts: readonly RobustnessEvaluation[], seconds: number): RobustnessEvaluation {
  if (parts.length === 0) throw new RangeError("joinEvaluations: expected at least one part");
  const n = parts.reduce((a, p) => a + p.count, 0);
  const join = (pick: (p: RobustnessEvaluation) => Uint8Array): Uint8Array => {
    const out = new Uint8Array(n);
    let at = 0;
    for (const p of parts) {
      out.set(pick(p), at);
      at += p.count;
    }
    return out;
  };
  const sum = (flags: Uint8Array) => flags.reduce((a, c) => a + c, 0);
  const cleanCorrect = join((p) => p.cleanCorrect);
  const correct = sum(cleanCorrect);
  const results = parts[0].results.map((r, e) => {
    const attacks: RobustnessAtEps["attacks"] = {};
    for (const name of Object.keys(r.attacks)) {
      const pick = (p: RobustnessEvaluation) => {
        const outcome = p.results[e]?.attacks[name];
        if (p.results[e]?.eps !== r.eps || outcome === undefined)
          throw new RangeError(`joinEvaluations: the parts differ in radius ${e} or attack ${name}`);
        return outcome;
      };
      const success = join((p) => pick(p).success);
      const zeroGradient = join((p) => pick(p).zeroGradient);
      attacks[name] = {
        robustAccuracy: (correct - sum(success)) / n,
        success,
        zeroGradient,
        zeroGradientFraction: r.attacks[name]!.zeroGradientFraction === null ? null : sum(zeroGradient) / n,
      };
    }
    return { eps: r.eps, stepSize: r.stepSize, attacks };
  });
  return { count: n, cleanAccuracy: correct / n, cleanCorrect, results, seconds };
}

/** A stream seed for (seed, eps index, batch index), so each batch's random start differs. */
function streamSeed(seed: number, epsIndex: number, batchIndex: number): number {
  return (seed ^ Math.imul(epsIndex + 1, 0x85ebca6b) ^ Math.imul(batchIndex + 1, 0x9e3779b1)) >>> 0;
}

/**
 * Clean and robust accuracy under the registered attacks in any {@link InputSpace}
 * (docs/math.md section 5), model in inference mode, loss = cross-entropy on the true label.
 * An example counts as robust at eps when it is classified correctly clean AND on the
 * adversarial input, so robust accuracy <= clean accuracy, and eps 0 (no attack run) gives the
 * clean accuracy exactly. Examples are processed in batches; the random start of batch j at
 * eps i is seeded from (seed, i, j). Each attack also flags the examples whose input gradient
 * was exactly zero (AttackOutcome.zeroGradient, zeroGradientFraction) and warns once when
 * there are any.
 *
 * @param space the examples (imageSpace, embeddingSpace); not disposed.
 * @param labels true classes [N].
 * @param who the caller's name in messages.
 * @returns clean accuracy, per-eps robust accuracy and per-example success per attack; leaves
 *   tf.memory().numTensors unchanged.
 * @throws RangeError on an empty eps list, a bad eps (negative, non-finite, larger than the
 *   clip range's width in l_inf or its diameter in l_2), steps, step size, batch size, an
 *   attack that is not registered, clip range, labels, or inputs outside the range; TypeError
 *   on non-float32 inputs.
 * @example evaluateIn(imageSpace(model, images), labels, { eps: [0, 0.1], attack: ["pgd"] }, "me")
 */
export function evaluateIn(
  space: InputSpace,
  labels: Labels,
  options: EvaluateRobustnessOptions,
  who = "evaluateIn",
): RobustnessEvaluation {
  const attacks = resolveAttacks(options, who).map((name) => attackSpec(name, who));
  const common = options.eps.map((eps) =>
    resolveAttackOptions(
      { ...options, eps, stepSize: options.stepSize ?? undefined, clip: space.clip },
      who,
      space.shape,
    ),
  );
  const batchSize = checkCount(options.batchSize ?? ATTACK_DEFAULTS.batch, "batchSize", who);
  const batchOffset = options.batchOffset ?? 0;
  if (!Number.isSafeInteger(batchOffset) || batchOffset < 0)
    throw new RangeError(`${who}: batchOffset must be an integer >= 0, got ${batchOffset}`);
  space.check(who);
  const n = space.count;
  const y = labelTensor(labels, n, space.classes, who);
  const truth = Int32Array.from(y.dataSync());
  y.dispose();

  const batches = Math.ceil(n / batchSize);
  const tally = new AttackTally(
    n,
    options.eps,
    attacks.map((a) => a.name),
    batches,
    options.onProgress,
    options.onWarning,
  );
  const byName = new Map(attacks.map((a) => [a.name, a]));
  for (let j = 0; j < batches; j++) {
    const start = j * batchSize;
    const size = Math.min(batchSize, n - start);
    const batch = space.batch(start, size);
    const batchLabels = truth.subarray(start, start + size);
    const yb = tf.tensor1d(batchLabels, "int32");
    try {
      tally.recordBatch(
        start,
        batchLabels,
        batch.predictClean(),
        (adversarial) => predictClasses(batch.logits, adversarial),
        (name, e, _eps, onZeroGradient) =>
          byName.get(name)!.run({
            batch,
            kind: space.kind,
            labels: yb,
            settings: { ...common[e], seed: streamSeed(common[e].seed, e, j + batchOffset) },
            who: attackWho(name, space.kind),
            onWarning: tally.warnOnce,
            onZeroGradient,
          }),
      );
    } finally {
      batch.dispose();
      yb.dispose();
    }
  }
  return tally.result((eps, e) => options.stepSize ?? defaultStepSize(eps, common[e].steps));
}

/**
 * Clean and robust accuracy of an image classifier under the registered attacks (FGSM and
 * PGD by default) in input space, clipped to the valid range: {@link evaluateIn} on
 * {@link imageSpace}.
 *
 * @param model a ViT (TransformerClassifier taking `images`).
 * @param images float32 [n, H, W, C] or [n, H*W*C] inside the clip range ([0, 1]); not disposed.
 * @param labels true classes [n].
 * @returns clean accuracy, per-eps robust accuracy and per-example success
 *   (results[i].attacks.pgd, ...); leaves tf.memory().numTensors unchanged.
 * @throws as {@link evaluateIn}, naming evaluateRobustness.
 * @example evaluateRobustness(model, images, labels, { eps: [0, 2 / 255, 8 / 255] }).results[1].attacks.pgd?.robustAccuracy
 */
export function evaluateRobustness(
  model: TransformerClassifier,
  images: tf.Tensor,
  labels: Labels,
  options: EvaluateRobustnessOptions,
): RobustnessEvaluation {
  return evaluateIn(imageSpace(model, images, options.clip ?? [0, 1]), labels, options, "evaluateRobustness");
}
