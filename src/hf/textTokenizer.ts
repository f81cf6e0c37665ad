import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import type { TextConfig } from "../nn/config.ts";
import { readJsonObject } from "./readJson.ts";
import { HfTokenizer } from "./tokenizer.ts";
import { HfImportError, hfPadTokenId } from "./types.ts";

/**
 * The tokenizer of an imported text model: DIR/tokenizer.json, checked against the model (its
 * ids must be rows of the model's word embeddings).
 *
 * @param dir the Hugging Face folder. @param config the imported model's config.
 * @param hfConfig config.json (its `pad_token_id` pads when tokenizer.json sets no padding).
 * @param warn receives one line when the tokenizer has fewer tokens than the model's
 *   embeddings (padded embeddings, or another model's tokenizer).
 * @throws HfImportError when the folder has no tokenizer.json, it cannot be read, or its
 *   vocabulary is larger than the model's.
 * @example const tok = await hfTextTokenizer(dir, config, hfConfig, "analyze");
 */
export async function hfTextTokenizer(
  dir: string,
  config: TextConfig,
  hfConfig: Record<string, unknown>,
  who: string,
  warn: (line: string) => void = () => {},
): Promise<HfTokenizer> {
  const tokenizer = await loadHfTokenizer(dir, config.maxLength, hfPadTokenId(hfConfig), who);
  if (tokenizer === null)
    throw new HfImportError(`${who}: ${dir}: no tokenizer.json; attnlip reads texts with the model's own tokenizer (save it with tokenizer.save_pretrained into the folder)`);
  if (tokenizer.size > config.vocabSize)
    throw new HfImportError(`${who}: ${dir}/tokenizer.json has ${tokenizer.size} tokens, the model's word embeddings only ${config.vocabSize} (vocab_size): not this model's tokenizer?`);
  if (tokenizer.padId < 0 || tokenizer.padId >= config.vocabSize)
    throw new HfImportError(`${who}: ${dir}: pad id ${tokenizer.padId} is outside the model's vocabulary [0, ${config.vocabSize})`);
  if (tokenizer.size < config.vocabSize)
    warn(`${who}: warning: ${dir}/tokenizer.json has ${tokenizer.size} tokens, the model ${config.vocabSize} word embeddings (vocab_size); fine when the embeddings are padded, but check that it is this model's tokenizer`);
  return tokenizer;
}

/**
 * Reads DIR/tokenizer.json (and DIR/tokenizer_config.json when present). Here, not in
 * tokenizer.ts, so that HfTokenizer reads no files and bundles for the browser (the explorer).
 *
 * @param dir the model folder. @param maxLength the model's positions.
 * @param padTokenId config.json's `pad_token_id` (used when tokenizer.json sets no padding).
 * @returns the tokenizer, or null when the folder has no tokenizer.json.
 * @throws HfImportError naming the file when it is unreadable, not JSON, or not a tokenizer
 *   the library can build.
 * @example const tok = await loadHfTokenizer("test/fixtures/hf/bert-tiny-random", 64, 0, "analyze");
 */
export async function loadHfTokenizer(dir: string, maxLength: number, padTokenId: number | null, who: string): Promise<HfTokenizer | null> {
  const path = join(dir, "tokenizer.json");
  if (!existsSync(path)) return null;
  const where = `${who}: ${path}`;
  if (!statSync(path).isFile()) throw new HfImportError(`${where}: not a file`);
  const json = await readJsonObject(path, where);
  const configPath = join(dir, "tokenizer_config.json");
  const config = existsSync(configPath) ? await readJsonObject(configPath, `${who}: ${configPath}`) : {};
  return HfTokenizer.fromJSON(json, maxLength, padTokenId, where, config);
}
