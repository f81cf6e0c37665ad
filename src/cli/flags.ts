import { Argument, Help, Option } from "commander";
import { z } from "zod";
import { checkEncoding } from "../data/text/charset.ts";
import { HF_ARCHITECTURES } from "../hf/architectures.ts";
import { flagError, numberProblem, readNumber, type NumberRule } from "../util/numberFlag.ts";
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
      ctx.addIssue({ code: "custom", message: numberProblem([text], rule) });
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
    const fields = text.split(",");
    const values = fields.map((field) => readNumber(field, rule));
    if (values.some((v) => v === null)) {
      ctx.addIssue({ code: "custom", message: numberProblem(fields, rule, true) });
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

/**
 * An option whose default the command works out itself (absent = not given: --resume refuses
 * flags that were given, and many defaults depend on other flags or on the checkpoint). Its
 * help shows commander's own "(default: SHOWN)" (see {@link showDescribedDefaults}), while the
 * parsed value stays undefined when the flag is left out.
 *
 * @param shown the default as the help shows it, e.g. "64" or "the checkpoint's, else text".
 * @example optionWithDefault("--n <int>", "the first n test examples", "64")
 */
export function optionWithDefault(flags: string, description: string, shown: string): Option {
  return new Option(flags, description).default(undefined, shown);
}

/** An optional argument whose default is shown as "(default: SHOWN)", like {@link optionWithDefault}. */
export function argumentWithDefault(name: string, description: string, shown: string): Argument {
  return new Argument(name, description).default(undefined, shown);
}

/**
 * commander's help, its "(default: X)" form for every default: a default given only as a
 * description (value undefined: {@link optionWithDefault}, {@link argumentWithDefault}) is shown
 * too, and a text default is shown as the user types it (16, not "16", as the described ones).
 * An option with commander choices (which commander checks) is shown like the others, whose
 * descriptions name their values ("tfjs backend: wasm or cpu (default: wasm)"), not in
 * commander's `(choices: "wasm", "cpu", default: "wasm")`: every command writes its options
 * one way.
 *
 * @example command.configureHelp(showDescribedDefaults())
 */
export function showDescribedDefaults(): Partial<Help> {
  // A copy with the default value and description commander's own wording needs, and no choices.
  const described = <T extends Option | Argument>(item: T): T => {
    const text = item.defaultValueDescription ?? (typeof item.defaultValue === "string" ? item.defaultValue : undefined);
    if (text === undefined && item.argChoices === undefined) return item;
    return Object.assign(Object.create(Object.getPrototypeOf(item) as object) as T, item, {
      argChoices: undefined,
      ...(text === undefined ? {} : { defaultValue: item.defaultValue ?? text, defaultValueDescription: text }),
    });
  };
  return {
    optionDescription(option: Option): string {
      return Help.prototype.optionDescription.call(this, described(option));
    },
    argumentDescription(argument: Argument): string {
      return Help.prototype.argumentDescription.call(this, described(argument));
    },
  };
}

/**
 * The help of a command's checkpoint argument (analyze, attack): an attnlip checkpoint or a
 * Hugging Face folder of any architecture attnlip imports (hf/architectures.ts: ViT, BERT and
 * GPT-2 classifiers and base models), so the help never names fewer than the importer reads.
 *
 * @example checkpointArgumentHelp() // "a checkpoint folder written by `attnlip train`, or a Hugging Face folder ..."
 */
export function checkpointArgumentHelp(): string {
  return (
    "a checkpoint folder written by `attnlip train`, or a Hugging Face folder that transformers' save_pretrained wrote " +
    `for ${[...HF_ARCHITECTURES.keys()].join(", ")} (config.json + model.safetensors; BERT and GPT-2 also tokenizer.json); ` +
    "or use --model with --random-init"
  );
}
