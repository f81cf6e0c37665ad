import { ATTACK_DEFAULTS, defaultStepSize } from "./defaults.ts";
import { checkClip, type ClipRange } from "./loss.ts";
import { per255Advice } from "../util/per255.ts";

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
  /** Step size alpha, finite and > 0; null/undefined = 2.5 * eps / steps. */
  stepSize?: number | null;
  /** Start from a random point of the ball [true]. */
  randomStart?: boolean;
  /** Runs from new random starts of the attacks that restart (APGD), an integer >= 1 [1]. */
  restarts?: number;
  /** Seed of the random start, an integer in [0, 2^32) [0]. */
  seed?: number;
  /** Query budget of score-based attacks (Square): iterations per input, an integer >= 1 [5000]. */
  queries?: number;
  /** Target classes of targeted attacks (APGD-T): the top-k classes after the true one, an integer >= 1 [9]. */
  targets?: number;
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
  restarts: number;
  seed: number;
  queries: number;
  targets: number;
  clip: ClipRange;
}

/**
 * A value as an error message shows it: numbers as they print, anything else with its type,
 * so that a string "0.1" (which prints like a valid radius) is not mistaken for a number.
 *
 * @example describeValue("0.1") // 'the string "0.1"'
 * @example describeValue(-1) // "-1"
 */
export function describeValue(value: unknown): string {
  if (typeof value === "number") return String(value);
  if (typeof value === "string") return `the string ${JSON.stringify(value)}`;
  if (value === null || value === undefined) return String(value);
  if (typeof value === "boolean" || typeof value === "bigint")
    return `the ${typeof value} ${String(value)}`;
  if (Array.isArray(value)) return "an array";
  return typeof value === "function" ? "a function" : "an object";
}

/**
 * Checks that a setting is a number and that it satisfies `ok`.
 *
 * @param expected what it must be, e.g. "an integer >= 1".
 * @throws RangeError `${who}: ${name} must be a number, got the string "0.1"` for a non-number,
 *   `${who}: ${name} must be ${expected}, got ${value}` for a number that fails `ok`.
 */
function checkNumber(
  value: unknown,
  ok: (v: number) => boolean,
  expected: string,
  name: string,
  who: string,
): number {
  if (typeof value !== "number")
    throw new RangeError(`${who}: ${name} must be a number, got ${describeValue(value)}`);
  if (!ok(value)) throw new RangeError(`${who}: ${name} must be ${expected}, got ${String(value)}`);
  return value;
}

/**
 * Checks a count that must be a whole number >= 1 (PGD steps, a batch size).
 *
 * @param name the argument's name in the message, e.g. "steps".
 * @returns the value.
 * @throws RangeError `${who}: ${name} must be an integer >= 1, got ...` (a non-number: "must
 *   be a number, got the string ...").
 */
export function checkCount(value: unknown, name: string, who: string): number {
  return checkNumber(value, (v) => Number.isInteger(v) && v >= 1, "an integer >= 1", name, who);
}

/** The largest radius an input range allows, and what that limit is, in words. */
export interface EpsLimit {
  /** The largest radius that does not hold every valid input. */
  max: number;
  /** What the limit is, e.g. "the width 1 of the input range [0, 1]". */
  what: string;
}

/**
 * The largest useful radius in a threat model on inputs in `clip`: in l_inf the range's width
 * high - low (a larger box holds every input of the range); in l_2 its diameter
 * (high - low) * sqrt(entries per example), when the number of entries is known. An unbounded
 * range (the embedding space's NO_CLIP) has no limit.
 *
 * @param entries entries per example (H * W * C for images), or omitted.
 * @returns the limit, or null when there is none.
 * @example epsLimit("l2", [0, 1], 32 * 32 * 3)?.max // 55.42562584220407 (sqrt(3072), CIFAR-10)
 */
export function epsLimit(norm: AttackNorm, clip: ClipRange, entries?: number): EpsLimit | null {
  const width = clip[1] - clip[0];
  if (!Number.isFinite(width)) return null;
  const range = `[${clip[0]}, ${clip[1]}]`;
  if (norm === "linf")
    return { max: width, what: `the width ${width} of the input range ${range}` };
  if (entries === undefined || !(entries > 0)) return null;
  const diameter = width * Math.sqrt(entries);
  return {
    max: diameter,
    what: `${diameter.toPrecision(6)}, the l_2 diameter of the input range ${range} for inputs of ${entries} entries`,
  };
}

/**
 * Checks an attack radius against its threat model and the valid input range. eps must be a
 * finite number >= 0 and at most {@link epsLimit} (l_inf: the range's width, so eps 8 on
 * images in [0, 1], almost surely 8/255 meant, is refused; l_2, when `inputShape` is given:
 * the range's diameter). An unbounded range (the embedding space's NO_CLIP) puts no upper limit.
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
  const value = checkNumber(
    eps,
    (v) => Number.isFinite(v) && v >= 0,
    "a finite number >= 0",
    "eps",
    who,
  );
  const entries =
    inputShape !== undefined && inputShape.length >= 2
      ? inputShape.slice(1).reduce((a, d) => a * d, 1)
      : undefined;
  const limit = epsLimit(norm, clip, entries);
  if (limit === null || value <= limit.max) return value;
  const advice = per255Advice(value, clip[1] - clip[0], limit.max);
  throw new RangeError(
    norm === "linf"
      ? `${who}: eps ${value} is larger than ${limit.what}: an l_inf ball that large holds every valid input` +
          (advice !== null ? ` (${advice})` : "")
      : `${who}: eps ${value} is larger than ${limit.what}: an l_2 ball that large holds every valid input`,
  );
}

/**
 * Checks and completes the settings of an attack: norm, eps ({@link checkEps}), steps, restarts,
 * queries and targets (integers >= 1), stepSize (finite > 0 when given; default 2.5 * eps / steps), seed (an integer in
 * [0, 2^32), as the CLI's --seed) and the clip range. Every attack calls it, so the same bad
 * value gets the same error everywhere, and a non-number (the string "0.1") is named as such.
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
    throw new RangeError(`${who}: norm must be linf or l2, got ${describeValue(norm)}`);
  const clip = options.clip ?? ([0, 1] as const);
  checkClip(clip, who);
  const eps = checkEps(options.eps, norm, clip, who, inputShape);
  const steps = checkCount(options.steps ?? ATTACK_DEFAULTS.steps, "steps", who);
  // A step size of 0 never moves the iterate: given, it must be > 0 (the default rule gives 0
  // only at eps 0, where nothing moves anyway).
  const stepSize =
    options.stepSize === undefined || options.stepSize === null
      ? defaultStepSize(eps, steps)
      : checkNumber(
          options.stepSize,
          (v) => Number.isFinite(v) && v > 0,
          "a finite number > 0",
          "stepSize",
          who,
        );
  const seed = checkNumber(
    options.seed ?? ATTACK_DEFAULTS.seed,
    (v) => Number.isInteger(v) && v >= 0 && v <= 0xffffffff,
    "an integer from 0 to 4294967295",
    "seed",
    who,
  );
  const restarts = checkCount(options.restarts ?? ATTACK_DEFAULTS.restarts, "restarts", who);
  const queries = checkCount(options.queries ?? ATTACK_DEFAULTS.queries, "queries", who);
  const targets = checkCount(options.targets ?? ATTACK_DEFAULTS.targets, "targets", who);
  return {
    norm,
    eps,
    steps,
    stepSize,
    randomStart: options.randomStart ?? ATTACK_DEFAULTS.randomStart,
    restarts,
    seed,
    queries,
    targets,
    clip,
  };
}
