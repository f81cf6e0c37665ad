import { existsSync } from "node:fs";
import { join } from "node:path";
import { trainedData, type TrainedData } from "../data/evaluationInputs.ts";
import type { TextTokenizer } from "../data/text/tokenizer.ts";
import { modelPreset, parseModelConfig } from "../nn/config.ts";
import { createModel } from "../nn/create.ts";
import type { TransformerClassifier } from "../nn/model.ts";
import { loadCheckpoint } from "../train/checkpoint.ts";
import { isHfFolder, loadHfModel } from "../hf/load.ts";
import { hfTextTokenizer } from "../hf/textTokenizer.ts";
import type { HfTokenizer } from "../hf/tokenizer.ts";
import { HfImportError } from "../hf/types.ts";
import { InputError } from "../util/errors.ts";

/** A model to evaluate, as analyze and attack load it. The caller disposes `model`. */
export interface EvaluatedModel {
  model: TransformerClassifier;
  /** What the model is, for messages and result files: the checkpoint folder, or "PRESET (random init, seed S)". */
  source: string;
  /** A text model's tokenizer: the checkpoint's, or a Hugging Face folder's tokenizer.json (null for ViTs and random-init models). */
  tokenizer: TextTokenizer | null;
  /** The checkpoint's data record and training fingerprints (null for a random-init or imported model). */
  trained: TrainedData | null;
  /** Whether the model was imported from a Hugging Face folder (attnlip did not train it). */
  imported: boolean;
  /** An imported model's own class names (id2label; null: none, or placeholders). */
  labels: string[] | null;
}

/**
 * The model a command evaluates: the checkpoint's (with its tokenizer and data record) when a
 * folder is given, imported when the folder is a Hugging Face one (src/hf/load.ts: config.json
 * with `model_type`), else the preset initialised with `seed`.
 *
 * @param who the command, for messages ("analyze", "attack").
 * @throws CheckpointError on a broken checkpoint; HfImportError on a Hugging Face folder
 *   attnlip cannot import; InputError `WHO: --model: ...` on an unknown preset.
 * @example const { model, source } = await evaluatedModel("analyze", undefined, "vit-micro", 0); model.dispose();
 */
export async function evaluatedModel(
  who: string,
  checkpoint: string | undefined,
  preset: string,
  seed: number,
): Promise<EvaluatedModel> {
  if (checkpoint !== undefined && (await isHfFolder(checkpoint))) {
    const hf = await loadHfModel(checkpoint, who);
    let tokenizer: HfTokenizer | null = null;
    try {
      if (hf.config.kind === "text") tokenizer = await hfTextTokenizer(checkpoint, hf.config, hf.hfConfig, who, (line) => console.error(line));
    } catch (e) {
      hf.model.dispose();
      throw e;
    }
    if (hf.addedHead)
      console.error(`${who}: warning: ${hf.architecture} has no classifier: attnlip added a linear head on its pooled output (random, seed 0), so its logits, accuracies and network values are those of a random head; fine-tune it with attnlip train --model ${checkpoint}`);
    return {
      model: hf.model as TransformerClassifier,
      source: `${checkpoint} (Hugging Face ${hf.architecture}${hf.addedHead ? ", with a random linear head added" : ""})`,
      tokenizer,
      trained: null,
      imported: true,
      labels: hf.labels,
    };
  }
  if (checkpoint !== undefined) {
    if (looksLikeHfWithoutConfig(checkpoint))
      throw new HfImportError(`${who}: ${checkpoint}: no config.json; a Hugging Face folder needs the config.json that save_pretrained writes beside model.safetensors`);
    const ckpt = await loadCheckpoint(checkpoint);
    return {
      model: ckpt.model as TransformerClassifier,
      source: checkpoint,
      tokenizer: ckpt.tokenizer,
      trained: trainedData(ckpt),
      imported: false,
      labels: null,
    };
  }
  let config;
  try {
    // A preset name, or a JSON config as train's --model takes it.
    config = preset.trimStart().startsWith("{") ? parseModelConfig(preset) : modelPreset(preset);
  } catch (error) {
    throw new InputError(`${who}: --model: ${(error as Error).message}`);
  }
  return {
    model: createModel(config, seed) as TransformerClassifier,
    source: `${preset} (random init, seed ${seed})`,
    tokenizer: null,
    trained: null,
    imported: false,
    labels: null,
  };
}

/** A folder with Hugging Face weights (model.safetensors or a shard index) but neither config.json nor train_state.json. */
function looksLikeHfWithoutConfig(dir: string): boolean {
  const has = (f: string) => existsSync(join(dir, f));
  return !has("config.json") && !has("train_state.json") && (has("model.safetensors.index.json") || (has("model.safetensors") && !has("optimizer.safetensors")));
}
