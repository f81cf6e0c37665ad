import { z } from "zod";
import { checkEncoding } from "../data/text/charset.ts";
import { describeNumberRule, flagError, readNumber, type NumberRule } from "../util/numberFlag.ts";
import type { InputError } from "../util/errors.ts";
import { defaultWorkers, oversubscriptionWarning } from "../parallel/workerCount.ts";

/**
 * Flag checking shared by the commands: numbers are read and worded by util/numberFlag.ts
 * (`COMMAND: FLAG: must be WHAT, got "TEXT"`), inside zod schemas where a command validates
 * its flags with one.
 */

/**
 * A zod schema for a numeric flag given as text: the number, or one issue "must be WHAT".
 *
 * @example numberFlag({ integer: true, min: 1 }).parse("16") // 16
 */
export function numberFlag(rule: NumberRule) {
  return z.string().transform((text, ctx) => {
    const value = readNumber(text, rule);
    if (value === null) {
      ctx.addIssue({ code: "custom", message: `must be ${describeNumberRule(rule)}` });
      return z.NEVER;
    }
    return value;
  });
}

/**
 * A zod schema for a list of numbers separated by commas: the numbers, or one issue
 * "must be a comma-separated list of WHAT".
 *
 * @example numberListFlag({ min: 0 }).parse("0, 0.1") // [0, 0.1]
 */
export function numberListFlag(rule: NumberRule) {
  return z.string().transform((text, ctx) => {
    const values = text.split(",").map((field) => readNumber(field, rule));
    if (values.some((v) => v === null)) {
      ctx.addIssue({
        code: "custom",
        message: `must be a comma-separated list of ${describeNumberRule(rule, true)}`,
      });
      return z.NEVER;
    }
    return values as number[];
  });
}

/**
 * The first issue of a failed flag schema as the command's one-line error,
 * `COMMAND: FLAG: PROBLEM, got "TEXT"`.
 *
 * @param flags the flag as the user spells it, by option key.
 */
export function firstFlagIssue<K extends string>(
  who: string,
  error: z.ZodError,
  raw: Partial<Record<K, unknown>>,
  flags: Partial<Record<K, string>>,
): InputError {
  const issue = error.issues[0];
  const key = String(issue.path[0]) as K;
  return flagError(who, flags[key] ?? `--${key}`, issue.message, raw[key]);
}

/**
 * The flags of commands that read text files (train, attack): the column / key of the text and
 * of the label, and the character encoding (checked against iconv-lite's labels).
 *
 * @example z.object({ ...TEXT_FILE_FLAGS }).parse({ encoding: "latin1" })
 */
export const TEXT_FILE_FLAGS = {
  textColumn: z.string().min(1, "must not be empty").optional(),
  labelColumn: z.string().min(1, "must not be empty").optional(),
  encoding: z
    .string()
    .superRefine((s, ctx) => {
      try {
        checkEncoding(s);
      } catch (e) {
        ctx.addIssue({ code: "custom", message: (e as Error).message });
      }
    })
    .optional(),
};

/**
 * Prints {@link oversubscriptionWarning}'s line to stderr when a command's worker count (the
 * --workers flag, else ATTNLIP_WORKERS, else the cores) is above the cores; the run goes on
 * (the count may be deliberate, e.g. to check agreement).
 *
 * @param flag the --workers value, undefined when the flag was not given.
 * @returns the worker count the command uses.
 * @throws InputError from defaultWorkers on a bad ATTNLIP_WORKERS.
 * @example const workers = resolveWorkers(64, "train") // prints "train: warning: --workers 64 is more than ..."
 */
export function resolveWorkers(flag: number | undefined, who: string): number {
  const workers = flag ?? defaultWorkers();
  const warning = oversubscriptionWarning(workers, who, flag === undefined ? "ATTNLIP_WORKERS" : "--workers");
  if (warning !== null) console.error(warning);
  return workers;
}
