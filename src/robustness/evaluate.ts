import { AttackTally, outcomeOf, resolveAttacks } from "./tally.ts";
import type { AttackName, AttackOutcome, RobustnessAtEps, RobustnessEvaluation } from "./tally.ts";
import { tf } from "../backend.ts";
import type { TransformerClassifier } from "../nn/model.ts";
import { ATTACK_DEFAULTS } from "./defaults.ts";
import { attackWho, imageSpace, type InputSpace } from "./inputSpace.ts";
import { labelTensor, predictWithMargins, type ClipRange, type Labels } from "./loss.ts";
import {
  checkCount,
  defaultStepSize,
  epsLimit,
  resolveAttackOptions,
  type AttackNorm,
  type EpsLimit,
} from "./options.ts";
import { attackSpec, checkAttackClasses, settingDefault, usesGradient } from "./attacks.ts";

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
  /**
   * Steps of every iterative attack; absent: each attack's own default (PGD 10; the APGD
   * attacks 100, as in Croce and Hein 2020).
   */
  steps?: number;
  /** Step size of iterative attacks; null/undefined = 2.5 * eps / steps for each eps. */
  stepSize?: number | null;
  /** Random start of iterative attacks [true]. */
  randomStart?: boolean;
  /** Runs from new random starts of the attacks that restart (APGD; APGD-T: per target class) [1]. */
  restarts?: number;
  /** Query budget of score-based attacks (Square), iterations per input [5000]. */
  queries?: number;
  /** Target classes of targeted attacks (APGD-T) [9], fewer when the model has fewer other classes. */
  targets?: number;
  /**
   * The range check's radius (see {@link rangeRadius}): the attacks also run at this radius,
   * reported as RobustnessEvaluation.range, not as a result row; absent or null: not run.
   */
  rangeEps?: number | null;
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
 * batchOffset) as one: per-example flags concatenated in order (the range check's too),
 * accuracies and flag fractions over all examples, the first part's step sizes and notes, the
 * given wall time.
 *
 * @throws RangeError on no parts or parts with other radii or attacks.
 * @example joinEvaluations([first, second], 12.5).cleanAccuracy
 */
export function joinEvaluations(
  parts: readonly RobustnessEvaluation[],
  seconds: number,
): RobustnessEvaluation {
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
  const joinRow = (
    r: RobustnessAtEps,
    at: (p: RobustnessEvaluation) => RobustnessAtEps | undefined,
  ) => {
    const attacks: RobustnessAtEps["attacks"] = {};
    for (const name of Object.keys(r.attacks)) {
      const pick = (p: RobustnessEvaluation) => {
        const outcome = at(p)?.attacks[name];
        if (at(p)?.eps !== r.eps || outcome === undefined)
          throw new RangeError(
            `joinEvaluations: the parts differ in radius ${r.eps} or attack ${name}`,
          );
        return outcome;
      };
      const brokenBy =
        r.attacks[name]!.brokenBy === undefined ? null : parts.flatMap((p) => pick(p).brokenBy!);
      attacks[name] = outcomeOf(
        {
          success: join((p) => pick(p).success),
          zero: join((p) => pick(p).zeroGradient),
          nonFinite: join((p) => pick(p).nonFiniteGradient),
          lossNotRaised: join((p) => pick(p).lossNotRaised),
          brokenBy,
        },
        correct,
        n,
        r.eps > 0,
        usesGradient(name),
      );
    }
    return { eps: r.eps, stepSize: r.stepSize, attacks };
  };
  const results = parts[0].results.map((r, e) => joinRow(r, (p) => p.results[e]));
  const range = parts[0].range;
  return {
    count: n,
    cleanAccuracy: correct / n,
    cleanCorrect,
    results,
    ...(range !== undefined ? { range: joinRow(range, (p) => p.range) } : {}),
    notes: parts[0].notes,
    seconds,
  };
}

/** A stream seed for (seed, eps index, batch index), so each batch's random start differs. */
function streamSeed(seed: number, epsIndex: number, batchIndex: number): number {
  return (seed ^ Math.imul(epsIndex + 1, 0x85ebca6b) ^ Math.imul(batchIndex + 1, 0x9e3779b1)) >>> 0;
}

/**
 * The radius of the range check: the largest ball the input range allows, where an attack
 * with a usable gradient breaks (almost) every input, so a robust accuracy that stays well
 * above 0 there points to gradient masking (or a model that predicts one class almost
 * everywhere). Images: {@link epsLimit} (l_inf: the width of the clip range, 1 on [0, 1];
 * l_2: its diameter, sqrt(H W C) on [0, 1]). Token embeddings have no range; there the box
 * of the inputs' own embedding entries [lo, hi] stands for it: l_inf hi - lo (a ball that
 * holds every sequence of these token embeddings), l_2 (hi - lo) sqrt(n d) with n the longest
 * batch's length.
 *
 * @param batchSize examples per pass when the space is read (embeddings) [32].
 * @returns the radius and what it is, in words; null when the inputs span no range (every
 *   entry equal).
 * @example rangeRadius(imageSpace(model, images), "linf")?.max // 1
 */
export function rangeRadius(space: InputSpace, norm: AttackNorm, batchSize = 32): EpsLimit | null {
  const entries =
    space.shape === undefined ? undefined : space.shape.slice(1).reduce((a, d) => a * d, 1);
  const limit = epsLimit(norm, space.clip, entries);
  if (limit !== null) return limit;
  let lo = Infinity;
  let hi = -Infinity;
  let perExample = 0;
  for (let start = 0; start < space.count; start += batchSize) {
    const batch = space.batch(start, Math.min(batchSize, space.count - start));
    try {
      const [min, max] = tf.tidy(() => [
        tf.min(batch.x).dataSync()[0],
        tf.max(batch.x).dataSync()[0],
      ]);
      lo = Math.min(lo, min);
      hi = Math.max(hi, max);
      perExample = Math.max(
        perExample,
        batch.x.shape.slice(1).reduce((a, d) => a * d, 1),
      );
    } finally {
      batch.dispose();
    }
  }
  const width = hi - lo;
  if (!(width > 0) || !Number.isFinite(width)) return null;
  const box = `the range [${lo.toPrecision(4)}, ${hi.toPrecision(4)}] of the inputs' token-embedding entries`;
  return norm === "linf"
    ? { max: width, what: `${width.toPrecision(4)}, the width of ${box}` }
    : {
        max: width * Math.sqrt(perExample),
        what: `${(width * Math.sqrt(perExample)).toPrecision(4)}, the l_2 diameter of ${box} over ${perExample} entries`,
      };
}

/**
 * Clean and robust accuracy under the registered attacks in any {@link InputSpace}
 * (docs/math.md section 5), model in inference mode. An example counts as robust at eps when
 * it is classified correctly clean AND on the adversarial input, so robust accuracy <= clean
 * accuracy, and eps 0 (no attack run) gives the clean accuracy exactly. Examples are
 * processed in batches; the random start of batch j at eps i is seeded from (seed, i, j).
 * Each attack reads its own defaults where a setting is not given (steps: PGD 10, the APGD
 * attacks 100). Besides the accuracies, each attack flags per example (AttackOutcome) an
 * exactly zero or a non-finite input gradient (warned about once), and an input it did not
 * break whose margin it did not lower (the loss did not rise): the masking checks of
 * masking.ts read them. With options.rangeEps the attacks also run at that radius
 * (RobustnessEvaluation.range, the range check).
 *
 * @param space the examples (imageSpace, embeddingSpace); not disposed.
 * @param labels true classes [N].
 * @param who the caller's name in messages.
 * @returns clean accuracy, per-eps robust accuracy and per-example flags per attack, the
 *   range check when asked, notes on attacks run reduced for the class count; leaves
 *   tf.memory().numTensors unchanged.
 * @throws RangeError on an empty eps list, a bad eps (negative, non-finite, larger than the
 *   clip range's width in l_inf or its diameter in l_2), steps, step size, batch size, an
 *   attack that is not registered, clip range, labels, or inputs outside the range; TypeError
 *   on non-float32 inputs; InputError when an attack cannot run on the model's class count
 *   (e.g. apgd-dlr with 2 classes).
 * @example evaluateIn(imageSpace(model, images), labels, { eps: [0, 0.1], attack: ["pgd"] }, "me")
 */
export function evaluateIn(
  space: InputSpace,
  labels: Labels,
  options: EvaluateRobustnessOptions,
  who = "evaluateIn",
): RobustnessEvaluation {
  const attacks = resolveAttacks(options, who).map((name) => attackSpec(name, who));
  const range = options.rangeEps ?? null;
  const radii = range === null ? options.eps : [...options.eps, range];
  const common = radii.map((eps) =>
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
  const notes = checkAttackClasses(
    attacks.map((a) => a.name),
    space.classes,
    common[0].targets,
    who,
  );
  space.check(who);
  const n = space.count;
  const y = labelTensor(labels, n, space.classes, who);
  const truth = Int32Array.from(y.dataSync());
  y.dispose();

  // Each attack's own steps where none are given, and the step size rule on them.
  const settingsOf = (name: string, e: number) => {
    const steps =
      options.steps ?? (settingDefault(name, "steps") as number | undefined) ?? common[e].steps;
    return {
      ...common[e],
      steps,
      stepSize: options.stepSize ?? defaultStepSize(common[e].eps, steps),
    };
  };
  const batches = Math.ceil(n / batchSize);
  const tally = new AttackTally(
    n,
    radii,
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
      const predict = (x: tf.Tensor) => predictWithMargins(batch.logits, x, batchLabels);
      tally.recordBatch(
        start,
        batchLabels,
        batch.predictClean(),
        predict(batch.x),
        predict,
        (name, e, _eps, flags) =>
          byName.get(name)!.run({
            batch,
            kind: space.kind,
            labels: yb,
            settings: {
              ...settingsOf(name, e),
              seed: streamSeed(common[e].seed, e, j + batchOffset),
            },
            who: attackWho(name, space.kind),
            onWarning: tally.warnOnce,
            ...flags,
          }),
      );
    } finally {
      batch.dispose();
      yb.dispose();
    }
  }
  return tally.result(
    (eps, e) => options.stepSize ?? defaultStepSize(eps, common[e].steps),
    notes,
    range !== null,
  );
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
  return evaluateIn(
    imageSpace(model, images, options.clip ?? [0, 1]),
    labels,
    options,
    "evaluateRobustness",
  );
}
