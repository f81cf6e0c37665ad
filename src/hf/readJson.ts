import { readFile } from "node:fs/promises";
import { parseJsonStrict } from "../io/strictJson.ts";
import { HfImportError } from "./types.ts";

// Reading a Hugging Face folder's JSON files from disk: kept apart from types.ts so that the
// import of a model from bytes (fromParts.ts) runs in a browser.

/**
 * A JSON file that must hold an object (config.json, tokenizer.json), read strictly (a key given
 * twice is refused).
 *
 * @param where the first words of error messages, e.g. "analyze: DIR: config.json".
 * @throws HfImportError `WHERE: REASON` when it cannot be read, is not JSON or not an object.
 * @example const config = await readJsonObject("DIR/config.json", "analyze: DIR: config.json");
 */
export async function readJsonObject(path: string, where: string): Promise<Record<string, unknown>> {
  let json: unknown;
  try {
    json = parseJsonStrict(await readFile(path, "utf8"));
  } catch (e) {
    throw new HfImportError(`${where}: ${(e as Error).message}`);
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) throw new HfImportError(`${where}: not a JSON object`);
  return json as Record<string, unknown>;
}
