import type { DecodedTensor } from "../io/safetensors.ts";
import { ConfigError, parseModelConfig, type ModelConfig } from "../nn/config.ts";
import { createModel, type Model } from "../nn/create.ts";
import { HF_ARCHITECTURES } from "./architectures.ts";
import { importTensors } from "./tensorMap.ts";
import { HfImportError, hfLabelNames, type HfArchitecture } from "./types.ts";

// A Hugging Face model from its parts already in memory (config.json's object and the decoded
// tensors): no file system, so the explorer's web worker imports a folder the user picked with
// the same code as `loadHfModel` (load.ts), which reads the parts from disk.

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
 * The architecture a Hugging Face config.json names and its attnlip model config, checked before
 * any weight is read: a setting attnlip does not compute is refused here.
 *
 * @param hf config.json's object.
 * @param where the first words of error messages, e.g. "analyze: DIR".
 * @throws HfImportError naming the architecture or setting attnlip does not import.
 * @example checkHfConfig(JSON.parse(configText), "explore: my-vit").architecture.name // "ViTForImageClassification"
 */
export function checkHfConfig(
  hf: Record<string, unknown>,
  where: string,
  tensorNames?: ReadonlySet<string>,
): { architecture: HfArchitecture; config: ModelConfig } {
  const arch = architectureOf(hf, where);
  try {
    return { architecture: arch, config: parseModelConfig(arch.config(hf, where, tensorNames)) };
  } catch (e) {
    if (e instanceof ConfigError) throw new HfImportError(`${where}: config.json gives an invalid model: ${e.message}`);
    throw e;
  }
}

/**
 * Imports a Hugging Face model from config.json's object and its decoded safetensors tensors
 * (float32/float16/bfloat16, read as float32) into an attnlip model that computes the same
 * function. Supported architectures: {@link HF_ARCHITECTURES}.
 *
 * @param tensors the tensors by name; emptied (the model holds its own copies).
 * @param where the first words of error messages, e.g. "explore: my-vit".
 * @throws HfImportError naming the problem: an architecture or setting attnlip does not import,
 *   a missing, mis-shaped or unused tensor.
 * @example
 *   const { model } = hfModelFromParts(JSON.parse(configText), decodeSafetensors(bytes).tensors, "explore: vit");
 *   model.forward(images).logits; // [b, classes]
 */
export function hfModelFromParts(
  hf: Record<string, unknown>,
  tensors: Map<string, DecodedTensor>,
  where: string,
): HfModel {
  const labels = hfLabelNames(hf, where);
  const { architecture: arch, config } = checkHfConfig(hf, where, new Set(tensors.keys()));
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
