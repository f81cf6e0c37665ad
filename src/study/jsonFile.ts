import { readFileSync } from "node:fs";
import type { z } from "zod";
import { DuplicateKeyError, parseJsonStrict } from "../io/strictJson.ts";
import { InputError } from "../util/errors.ts";
import { firstIssue } from "../util/zodIssue.ts";

/**
 * The one way the study files (study-grid.json, result.json, committed studies) are read:
 * strict JSON (a repeated key is refused) and a zod schema, each failure one InputError line
 * that names the file.
 */

/**
 * A JSON file's value.
 *
 * @param prefix put before the path in messages, e.g. "study: ".
 * @throws InputError `PREFIX PATH: not valid JSON (WHY)` (or the repeated key), or `PREFIX cannot
 *   read PATH (CODE)`.
 * @example readJsonFile("runs/study/study-grid.json", "study: ")
 */
export function readJsonFile(path: string, prefix: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    throw new InputError(`${prefix}cannot read ${path} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  try {
    return parseJsonStrict(text);
  } catch (e) {
    // A repeated key says so itself; any other parse error is worded as for --config.
    throw new InputError(`${prefix}${path}: ${e instanceof DuplicateKeyError ? e.message : `not valid JSON (${(e as Error).message})`}`);
  }
}

/**
 * A value checked against a schema.
 *
 * @throws InputError `WHERE: FIELD.PATH: WHY` naming the first issue.
 * @example validated(RunResultSchema, value, "study: runs/x/result.json")
 */
export function validated<T extends z.ZodType>(schema: T, value: unknown, where: string): z.output<T> {
  const result = schema.safeParse(value);
  if (!result.success) {
    throw new InputError(`${where}: ${firstIssue(result.error, value)}`);
  }
  return result.data;
}
