import { existsSync, statSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import type { DecodedTensor } from "../io/safetensors.ts";
import { readSafetensors } from "../io/safetensorsFile.ts";
import { parseJsonStrict } from "../io/strictJson.ts";
import { ConfigError, parseModelConfig, type ModelConfig } from "../nn/config.ts";
import { createModel, type Model } from "../nn/create.ts";
import { HF_ARCHITECTURES } from "./architectures.ts";
import { importTensors } from "./tensorMap.ts";
import { HfImportError, hfLabelNames, readJsonObject, type HfArchitecture } from "./types.ts";

/** A model imported from a Hugging Face folder. The caller disposes `model`. */
export interface HfModel {
  model: Model;
  config: ModelConfig;
  /** The class in config.json's `architectures`, e.g. "ViTForImageClassification". */
  architecture: string;
  /** config.json as read (kept for export). */
  hfConfig: Record<string, unknown>;
  /** The model's own class names (id2label), or null when it has only placeholders ({@link hfLabelNames}). */
  labels: string[] | null;
  /** A base model's head, added by attnlip (random, seed 0): not in the file, not exported. */
  addedHead: boolean;
}

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
  const arch = architectureOf(hf, where);
  const check = (names?: ReadonlySet<string>): ModelConfig => {
    try {
      return parseModelConfig(arch.config(hf, where, names));
    } catch (e) {
      if (e instanceof ConfigError) throw new HfImportError(`${where}: config.json gives an invalid model: ${e.message}`);
      throw e;
    }
  };
  check(); // settings attnlip does not compute are refused before the weights are read
  const labels = hfLabelNames(hf, where);
  const tensors = await readWeights(dir, where);
  const config = check(new Set(tensors.keys()));
  const weights = importTensors(arch.tensors(config), tensors, arch.name, where, arch.ignored);
  tensors.clear();
  const model = createModel(config);
  try {
    // A base model has no classifier: its head keeps createModel's seeded initialisation.
    model.setWeights(weights, { partial: arch.addsHead === true });
  } catch (e) {
    model.dispose();
    throw new HfImportError(`${where}: ${(e as Error).message}`);
  }
  return { model, config, architecture: arch.name, hfConfig: hf, labels, addedHead: arch.addsHead === true };
}

function architectureOf(hf: Record<string, unknown>, where: string): HfArchitecture {
  const supported = [...HF_ARCHITECTURES.keys()].join(", ");
  const list = hf.architectures;
  if (list === undefined)
    throw new HfImportError(`${where}: config.json names no architecture ("architectures"); attnlip imports ${supported}`);
  if (!Array.isArray(list) || list.length === 0 || typeof list[0] !== "string")
    throw new HfImportError(`${where}: config.json: "architectures" must be a list of class names, e.g. ["ViTForImageClassification"], got ${JSON.stringify(list)}`);
  const arch = HF_ARCHITECTURES.get(list[0]);
  if (arch === undefined) throw new HfImportError(`${where}: architecture ${list[0]} is not supported; attnlip imports ${supported}`);
  if (hf.model_type !== undefined && hf.model_type !== arch.modelType)
    throw new HfImportError(`${where}: config.json: model_type ${JSON.stringify(hf.model_type)} does not match architecture ${arch.name} (model_type "${arch.modelType}")`);
  return arch;
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
