import { InputError } from "../util/errors.ts";
import { flagError } from "../util/numberFlag.ts";
/**
 * Validation and conversion of user-supplied rows: probabilities and logits.
 * Errors are `InputError`s whose message names the argument and what was expected.
 */

/** Options of {@link parseProbabilityRow}. */
export interface ProbabilityRowOptions {
  /** Divide by the sum instead of rejecting rows whose sum is off from 1 (default false). */
  normalize?: boolean;
  /** Largest accepted |sum - 1| when not normalizing (default 1e-6). */
  tolerance?: number;
  /** Name used in error messages (default "p"). */
  name?: string;
  /**
   * How the caller rescales a row, named when a sum is refused (default "pass --normalize to
   * rescale", the CLI's flag; the explorer page names its box).
   */
  remedy?: string;
}

/**
 * Checks a probability row: non-empty, every entry finite and >= 0, sum within
 * `tolerance` of 1 (or normalized when `normalize`).
 *
 * @returns a Float64Array copy (normalized when asked).
 * @throws InputError naming the argument, the position and the problem.
 */
export function parseProbabilityRow(
  values: ArrayLike<number>,
  options: ProbabilityRowOptions = {},
): Float64Array {
  const { normalize = false, tolerance = 1e-6, name = "p", remedy = "pass --normalize to rescale" } = options;
  if (values.length === 0) throw new InputError(`${name}: empty row, expected at least one probability`);
  const p = Float64Array.from(values as ArrayLike<number>);
  let sum = 0;
  let max = 0;
  for (let i = 0; i < p.length; i++) {
    const v = p[i];
    // Positions are 1-based in messages, as a user counts them.
    if (Number.isNaN(v)) throw new InputError(`${name}: entry ${i + 1} is NaN, expected a probability in [0, 1]`);
    if (!Number.isFinite(v)) throw new InputError(`${name}: entry ${i + 1} is ${v}, expected a finite probability`);
    if (v < 0) throw new InputError(`${name}: entry ${i + 1} is negative (${v}), expected a probability >= 0`);
    sum += v;
    if (v > max) max = v;
  }
  if (normalize) {
    if (!(max > 0)) throw new InputError(`${name}: all entries are 0, cannot normalize`);
    // Divide by the maximum first so that the sum cannot overflow (entries near 1e308).
    let scaled = 0;
    for (let i = 0; i < p.length; i++) scaled += p[i] / max;
    for (let i = 0; i < p.length; i++) p[i] = p[i] / max / scaled;
    return p;
  }
  if (Math.abs(sum - 1) > tolerance)
    throw new InputError(
      `${name}: entries sum to ${sum}, expected 1 within ${tolerance} (${remedy})`,
    );
  return p;
}

/**
 * Numerically stable softmax of a logit row (log-sum-exp: the maximum is subtracted
 * first), so logits of magnitude 1e3 and beyond work.
 *
 * @returns probabilities in float64, summing to 1 up to rounding.
 * @throws InputError on an empty row or a NaN or infinite logit.
 */
export function softmaxRow(logits: ArrayLike<number>, name = "logits"): Float64Array {
  if (logits.length === 0) throw new InputError(`${name}: empty row, expected at least one logit`);
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) {
    const z = logits[i];
    if (!Number.isFinite(z))
      throw new InputError(`${name}: entry ${i + 1} is ${z}, expected a finite logit`);
    if (z > max) max = z;
  }
  const p = new Float64Array(logits.length);
  let sum = 0;
  for (let i = 0; i < logits.length; i++) {
    p[i] = Math.exp(logits[i] - max);
    sum += p[i];
  }
  for (let i = 0; i < p.length; i++) p[i] /= sum;
  return p;
}

/**
 * Parses "0.5,0.3,0.2" into numbers, strictly: fields are separated by commas (spaces around
 * them are ignored), every field must be a complete decimal number, and an empty field is an
 * error ("nan" and "inf" words are accepted so that the row validator can name the problem).
 *
 * @throws InputError naming the argument and the malformed field (1-based).
 */
export function parseNumberList(text: string, name: string): number[] {
  if (text.trim().length === 0) throw new InputError(`${name}: empty row, expected comma-separated numbers`);
  return text.split(",").map((raw, i) => {
    const field = raw.trim();
    if (field.length === 0) throw new InputError(`${name}: field ${i + 1} is empty`);
    return parseNumber(field, `${name}: field ${i + 1}`);
  });
}

/**
 * Parses one decimal number strictly ("1e-3" is accepted; so are "nan" and "inf" words, so
 * that validators can name the problem).
 *
 * @param where prefix of the error message, e.g. "--file row 2: field 3".
 * @throws InputError `${where}: must be a number, got "abc"` (the wording of every numeric
 *   flag, util/numberFlag.ts) when the text is not a complete number.
 */
export function parseNumber(field: string, where: string): number {
  const lower = field.trim().toLowerCase();
  if (lower === "nan") return NaN;
  if (["inf", "+inf", "infinity", "+infinity"].includes(lower)) return Infinity;
  if (["-inf", "-infinity"].includes(lower)) return -Infinity;
  if (!/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(lower))
    throw flagError("", where, "must be a number", field);
  return Number(lower);
}
