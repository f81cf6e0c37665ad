import { InputError } from "./errors.ts";

/**
 * The one wording of a bad number on the command line, whichever command or flag it was given
 * to: `COMMAND: FLAG: must be WHAT, got "TEXT"`, where WHAT says everything the flag accepts
 * (so one message covers "abc", "1.5", "-1", "1e12" and "1e400" alike) and TEXT is what the
 * user typed.
 *
 * @example parseNumberFlag("abc", "--n", { integer: true, min: 1 }, "analyze")
 *   // throws InputError `analyze: --n: must be a positive integer, got "abc"`
 */

/** What a numeric flag accepts: always a finite decimal number, then these limits. */
export interface NumberRule {
  /** Whole numbers written in digits only ("1000", not "1e3" or "1000.0"). */
  integer?: boolean;
  /** Smallest value accepted (inclusive). */
  min?: number;
  /** Values must be strictly above this. */
  above?: number;
  /** Largest value accepted (inclusive). */
  max?: number;
  /** Why the limits are what they are, said after them in parentheses. */
  why?: string;
}

/** A complete decimal number ("1e-3", "+2", ".5"; not "", "0x10", "NaN", "Infinity", "1e"). */
const DECIMAL = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

/**
 * A whole number in digits ("16", "+2", "007"): what an integer flag takes. A count, seed or
 * index written "1e3", "16.0" or "2." is refused, not read as 1000, 16 or 2: a decimal point or
 * an exponent in a count is more likely a mistake (a value meant for another flag) than a way
 * of writing it.
 */
const DIGITS = /^[+-]?\d+$/;

/**
 * What a rule accepts, in words.
 *
 * @param plural "integers ..." instead of "an integer ..." (for lists).
 * @example describeNumberRule({ integer: true, min: 1 }) // "a positive integer"
 * @example describeNumberRule({ integer: true, min: 1, max: 10000 }) // "an integer from 1 to 10000"
 * @example describeNumberRule({ above: 0 }) // "a finite number > 0"
 */
export function describeNumberRule(rule: NumberRule, plural = false): string {
  const noun = rule.integer
    ? plural
      ? "integers"
      : "an integer"
    : plural
      ? "finite numbers"
      : "a finite number";
  let words: string;
  if (rule.min !== undefined && rule.max !== undefined)
    words = `${rule.integer ? noun : plural ? "numbers" : "a number"} from ${rule.min} to ${rule.max}`;
  else if (rule.integer && rule.min === 1 && rule.above === undefined)
    words = plural ? "positive integers" : "a positive integer";
  else {
    const limits = [
      rule.min !== undefined ? `>= ${rule.min}` : null,
      rule.above !== undefined ? `> ${rule.above}` : null,
      rule.max !== undefined ? `<= ${rule.max}` : null,
    ].filter((s) => s !== null);
    words = [noun, ...limits].join(" ");
  }
  return rule.why === undefined ? words : `${words} (${rule.why})`;
}

/**
 * What a refused value should have been: "must be WHAT" ({@link describeNumberRule}), and for
 * an integer flag given a whole number in another notation that is otherwise in range ("1e3",
 * "16.0"), ", written in digits (1e3 is 1000)", so the refusal says why.
 *
 * @param texts the values given (one, or a list's fields).
 * @param plural as {@link describeNumberRule}'s (a list).
 * @example numberProblem(["1e3"], { integer: true, min: 1, max: 10000 })
 *   // "must be an integer from 1 to 10000, written in digits (1e3 is 1000)"
 */
export function numberProblem(texts: readonly string[], rule: NumberRule, plural = false): string {
  const words = `must be ${plural ? "a comma-separated list of " : ""}${describeNumberRule(rule, plural)}`;
  if (!rule.integer) return words;
  const other = texts
    .map((t) => t.trim())
    .find(
      (t) => !DIGITS.test(t) && Number.isSafeInteger(readNumber(t, { ...rule, integer: false })),
    );
  return other === undefined ? words : `${words}, written in digits (${other} is ${Number(other)})`;
}

/**
 * Reads a number typed on the command line and checks it against a rule.
 *
 * @returns the value, or null when the text is not a finite decimal number inside the rule (for
 *   an integer rule: not a whole number written in digits, e.g. "1e3" or "16.0").
 * @example readNumber(" 16 ", { integer: true, min: 1 }) // 16
 */
export function readNumber(text: string, rule: NumberRule): number | null {
  const trimmed = text.trim();
  if (!(rule.integer ? DIGITS : DECIMAL).test(trimmed)) return null;
  const value = Number(trimmed) || 0; // "-0" is 0
  if (!Number.isFinite(value)) return null;
  if (rule.integer && !Number.isSafeInteger(value)) return null;
  if (rule.min !== undefined && value < rule.min) return null;
  if (rule.above !== undefined && !(value > rule.above)) return null;
  if (rule.max !== undefined && value > rule.max) return null;
  return value;
}

/**
 * The one-line error of a bad flag value: `WHO: FLAG: PROBLEM, got "TEXT"`.
 *
 * @param who the command ("analyze"), or "" for none.
 * @param problem what is wrong, e.g. "must be a positive integer".
 * @param given what the user typed (quoted as JSON, so "" and spaces show).
 * @example flagError("attack", "--norm", "expected linf or l2", "l1").message // 'attack: --norm: expected linf or l2, got "l1"'
 */
export function flagError(who: string, flag: string, problem: string, given: unknown): InputError {
  const shown = typeof given === "string" ? JSON.stringify(given) : String(given);
  return new InputError(`${who === "" ? "" : `${who}: `}${flag}: ${problem}, got ${shown}`);
}

/**
 * Parses a numeric flag.
 *
 * @param who the command, first word of the message ("" for none).
 * @returns the value.
 * @throws InputError `WHO: FLAG: must be WHAT, got "TEXT"` ({@link describeNumberRule}).
 * @example parseNumberFlag("1000", "--iterations", { integer: true, min: 1, max: 10000 }, "analyze") // 1000
 */
export function parseNumberFlag(text: string, flag: string, rule: NumberRule, who = ""): number {
  const value = readNumber(text, rule);
  if (value === null) throw flagError(who, flag, numberProblem([text], rule), text);
  return value;
}
