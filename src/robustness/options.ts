import { ATTACK_DEFAULTS, defaultStepSize } from "./defaults.ts";
import { checkClip, type ClipRange } from "./loss.ts";

export { defaultStepSize };

/**
 * The one check of the settings every attack takes (every registered attack, in any input
 * space, evaluateRobustness and evaluateTextRobustness all call
 * {@link resolveAttackOptions}), so that a radius, a step count or a clip range is refused
 * with the same words whichever attack it was given to. The CLI checks its flags first; this
 * is the library's own boundary.
 */

/** The threat models: l_inf (every entry moves by at most eps) or l_2 (per-example Euclidean). */
export type AttackNorm = "linf" | "l2";

/** The norms, for validation. */
export const ATTACK_NORMS: readonly AttackNorm[] = ["linf", "l2"];

/** The settings {@link resolveAttackOptions} checks (PgdOptions and FgsmOptions extend it). */
export interface AttackSettings {
  /** Threat model ["linf"]. */
  norm?: AttackNorm;
  /** Radius, finite and >= 0, in input units; at most the input range's width (l_inf). */
  eps: number;
  /** Ascent steps K, an integer >= 1 [ATTACK_DEFAULTS.steps = 10]. */
  steps?: number;
  /** Step size alpha, finite and >= 0; null/undefined = 2.5 * eps / steps. */
  stepSize?: number | null;
  /** Start from a random point of the ball [true]. */
  randomStart?: boolean;
  /** Seed of the random start, a finite number [0]. */
  seed?: number;
  /** Valid input range [low, high] [[0, 1]]. */
  clip?: ClipRange;
}

/** Settings with every default filled, as the attacks use them. */
export interface ResolvedAttackSettings {
  norm: AttackNorm;
  eps: number;
  steps: number;
  stepSize: number;
  randomStart: boolean;
  seed: number;
  clip: ClipRange;
}

/**
 * Checks a count that must be a whole number >= 1 (PGD steps, a batch size).
 *
 * @param name the argument's name in the message, e.g. "steps".
 * @returns the value.
 * @throws RangeError `${who}: ${name} must be an integer >= 1, got ...`.
 */
export function checkCount(value: unknown, name: string, who: string): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1)
    throw new RangeError(`${who}: ${name} must be an integer >= 1, got ${String(value)}`);
  return value;
}

/**
 * Checks an attack radius against its threat model and the valid input range. eps must be a
 * finite number >= 0; in l_inf it must not exceed the range's width high - low (a larger box
 * holds every input of the range: eps 8 on images in [0, 1] is almost surely 8/255 meant);
 * in l_2, when `inputShape` is given, it must not exceed the range's diameter
 * (high - low) * sqrt(entries per example). An unbounded range (the embedding space's
 * NO_CLIP) puts no upper limit.
 *
 * @param inputShape the inputs' shape [b, ...] (only its trailing entries count), or omitted.
 * @returns eps.
 * @throws RangeError naming `who`, eps and, for a radius too large, the range.
 * @example checkEps(8, "linf", [0, 1], "fgsm") // throws: eps 8 is larger than the width 1 of [0, 1]
 */
export function checkEps(
  eps: unknown,
  norm: AttackNorm,
  clip: ClipRange,
  who: string,
  inputShape?: readonly number[],
): number {
  if (typeof eps !== "number" || !Number.isFinite(eps) || eps < 0)
    throw new RangeError(`${who}: eps must be a finite number >= 0, got ${String(eps)}`);
  const width = clip[1] - clip[0];
  if (!Number.isFinite(width)) return eps;
  const range = `[${clip[0]}, ${clip[1]}]`;
  if (norm === "linf" && eps > width)
    throw new RangeError(
      `${who}: eps ${eps} is larger than the width ${width} of the input range ${range}: an l_inf ball that large holds every valid input` +
        (eps >= 1 && width <= 1 ? ` (for 8/255 write ${(eps / 255).toPrecision(4)})` : ""),
    );
  if (norm === "l2" && inputShape !== undefined && inputShape.length >= 2) {
    const entries = inputShape.slice(1).reduce((a, d) => a * d, 1);
    const diameter = width * Math.sqrt(entries);
    if (entries > 0 && eps > diameter)
      throw new RangeError(
        `${who}: eps ${eps} is larger than ${diameter.toPrecision(6)}, the l_2 diameter of the input range ${range} for inputs of ${entries} entries: an l_2 ball that large holds every valid input`,
      );
  }
  return eps;
}

/**
 * Checks and completes the settings of an attack: norm, eps ({@link checkEps}), steps (integer
 * >= 1), stepSize (finite >= 0, default 2.5 * eps / steps), seed (finite) and the clip range.
 * Every attack calls it, so the same bad value gets the same error everywhere.
 *
 * @param who the caller's name, first word of every message (e.g. "pgd", "evaluateRobustness").
 * @param inputShape the inputs' shape [b, ...], for the l_2 radius bound (optional).
 * @returns the settings with defaults filled.
 * @throws RangeError naming `who` and the bad setting.
 * @example resolveAttackOptions({ eps: 0.1 }, "pgd").stepSize // 0.025 (2.5 * 0.1 / 10)
 */
export function resolveAttackOptions(
  options: AttackSettings,
  who: string,
  inputShape?: readonly number[],
): ResolvedAttackSettings {
  const norm = options.norm ?? ATTACK_DEFAULTS.norm;
  if (!ATTACK_NORMS.includes(norm))
    throw new RangeError(`${who}: norm must be linf or l2, got ${String(norm)}`);
  const clip = options.clip ?? ([0, 1] as const);
  checkClip(clip, who);
  const eps = checkEps(options.eps, norm, clip, who, inputShape);
  const steps = checkCount(options.steps ?? ATTACK_DEFAULTS.steps, "steps", who);
  const stepSize = options.stepSize ?? defaultStepSize(eps, steps);
  if (typeof stepSize !== "number" || !Number.isFinite(stepSize) || stepSize < 0)
    throw new RangeError(`${who}: stepSize must be a finite number >= 0, got ${String(stepSize)}`);
  const seed = options.seed ?? ATTACK_DEFAULTS.seed;
  if (typeof seed !== "number" || !Number.isFinite(seed))
    throw new RangeError(`${who}: seed must be a finite number, got ${String(seed)}`);
  return { norm, eps, steps, stepSize, randomStart: options.randomStart ?? ATTACK_DEFAULTS.randomStart, seed, clip };
}
