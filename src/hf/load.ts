import { existsSync, statSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import type { DecodedTensor } from "../io/safetensors.ts";
import { readSafetensors } from "../io/safetensorsFile.ts";
import { parseJsonStrict } from "../io/strictJson.ts";
import { checkHfConfig, hfModelFromParts, type HfModel } from "./fromParts.ts";
import { HfImportError } from "./types.ts";
import { readJsonObject } from "./readJson.ts";

export type { HfModel };

/**
 * Whether `dir` is to be read as a Hugging Face model folder: its config.json has
 * `model_type` or `architectures` (attnlip's own config.json has `kind`); or it has a
 * config.json that says neither (unreadable, or neither key) and no train_state.json, so that
 * {@link loadHfModel} names what is wrong with config.json instead of the folder being taken
 * for a training checkpoint with missing files.
 *
 * @example isHfFolder("runs/demo/baseline") // false
 */
export async function isHfFolder(dir: string): Promise<boolean> {
  const path = join(dir, "config.json");
  if (!existsSync(path) || !statSync(path).isFile()) return false;
  let json: unknown;
  try {
    json = parseJsonStrict(await readFile(path, "utf8"));
  } catch {
    return !existsSync(join(dir, "train_state.json"));
  }
  if (typeof json === "object" && json !== null && !Array.isArray(json)) {
    if ("kind" in json) return false;
    if ("model_type" in json || "architectures" in json) return true;
  }
  return !existsSync(join(dir, "train_state.json"));
}

/**
 * Imports a Hugging Face model folder (config.json + model.safetensors, float32/float16/bfloat16
 * tensors read as float32) into an attnlip model that computes the same function.
 * Supported: see {@link HF_ARCHITECTURES} (the class named first in `architectures`).
 *
 * @param dir the folder `save_pretrained` wrote.
 * @param who the command, first word of error messages.
 * @throws HfImportError (an InputError: one line from the CLI) naming the folder and the problem:
 *   no config.json, an architecture attnlip does not import (with the supported list), a
 *   setting without an attnlip equivalent, a missing, mis-shaped or unused tensor, or a broken
 *   shard index (model.safetensors.index.json: sharded weights are read shard by shard).
 * @example
 *   const { model } = await loadHfModel("test/fixtures/hf/vit-tiny-random", "analyze");
 *   model.forward(images).logits; // [b, classes]
 */
export async function loadHfModel(dir: string, who: string): Promise<HfModel> {
  const where = `${who}: ${dir}`;
  const configPath = join(dir, "config.json");
  if (!existsSync(configPath)) throw new HfImportError(`${where}: no config.json`);
  const hf = await readJsonObject(configPath, `${where}: config.json`);
  checkHfConfig(hf, where); // settings attnlip does not compute are refused before the weights are read
  return hfModelFromParts(hf, await readWeights(dir, where), where);
}

/**
 * The folder's tensors: model.safetensors, or the shards model.safetensors.index.json lists
 * (its `weight_map`: tensor name -> shard file), read one shard at a time.
 *
 * @throws HfImportError when neither exists, a path is not a file, the index is malformed, a
 *   shard is missing, a shard lacks a tensor the index puts there, or two shards hold one tensor.
 */
async function readWeights(dir: string, where: string): Promise<Map<string, DecodedTensor>> {
  const single = join(dir, "model.safetensors");
  const index = join(dir, "model.safetensors.index.json");
  if (existsSync(single)) {
    if (!statSync(single).isFile()) throw new HfImportError(`${where}: model.safetensors is not a file`);
    return (await readSafetensors(single, { name: `${where}/model.safetensors` })).tensors;
  }
  if (!existsSync(index)) throw new HfImportError(`${where}: no model.safetensors (attnlip reads safetensors weights, not pytorch_model.bin)`);
  let map: Record<string, unknown>;
  try {
    const json = parseJsonStrict(await readFile(index, "utf8")) as { weight_map?: unknown };
    if (typeof json?.weight_map !== "object" || json.weight_map === null || Array.isArray(json.weight_map)) throw new SyntaxError('no "weight_map" object');
    map = json.weight_map as Record<string, unknown>;
  } catch (e) {
    throw new HfImportError(`${where}: model.safetensors.index.json: ${(e as Error).message}`);
  }
  const shards = new Map<string, string[]>();
  for (const [name, file] of Object.entries(map)) {
    if (typeof file !== "string" || file.includes("/") || file.includes("\\") || !file.endsWith(".safetensors"))
      throw new HfImportError(`${where}: model.safetensors.index.json: tensor "${name}" names shard ${JSON.stringify(file)}, expected a .safetensors file in the folder`);
    shards.set(file, [...(shards.get(file) ?? []), name]);
  }
  const tensors = new Map<string, DecodedTensor>();
  for (const [file, names] of shards) {
    const path = join(dir, file);
    if (!existsSync(path) || !statSync(path).isFile()) throw new HfImportError(`${where}: shard ${file} (listed in model.safetensors.index.json) is missing`);
    const shard = (await readSafetensors(path, { name: `${where}/${file}` })).tensors;
    for (const name of names) {
      const t = shard.get(name);
      if (t === undefined) throw new HfImportError(`${where}: shard ${file} has no tensor "${name}" (model.safetensors.index.json puts it there)`);
      tensors.set(name, t);
    }
    for (const name of shard.keys())
      if (!names.includes(name)) {
        if (tensors.has(name) || map[name] !== undefined) continue;
        throw new HfImportError(`${where}: shard ${file} holds tensor "${name}", which model.safetensors.index.json does not list`);
      }
  }
  return tensors;
}
