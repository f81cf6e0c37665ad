import { readFileSync } from "node:fs";
import type { z } from "zod";
import { parseJsonStrict } from "../io/strictJson.ts";
import { InputError } from "../util/errors.ts";

/**
 * The one way the study files (study-grid.json, result.json, committed studies) are read:
 * strict JSON (a repeated key is refused) and a zod schema, each failure one InputError line
 * that names the file.
 */

/**
 * A JSON file's value.
 *
 * @param prefix put before the path in messages, e.g. "study: ".
 * @throws InputError `PREFIX PATH: WHY` when the file cannot be read or is not strict JSON.
 * @example readJsonFile("runs/study/study-grid.json", "study: ")
 */
export function readJsonFile(path: string, prefix: string): unknown {
  try {
    return parseJsonStrict(readFileSync(path, "utf8"));
  } catch (e) {
    throw new InputError(`${prefix}${path}: ${(e as Error).message}`);
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
    const issue = result.error.issues[0];
    throw new InputError(`${where}: ${issue.path.join(".") || "(root)"}: ${issue.message}`);
  }
  return result.data;
}
