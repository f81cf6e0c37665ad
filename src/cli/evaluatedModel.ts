import { trainedData, type TrainedData } from "../data/evaluationInputs.ts";
import type { WordTokenizer } from "../data/text/tokenizer.ts";
import { modelPreset } from "../nn/config.ts";
import { createModel } from "../nn/create.ts";
import type { TransformerClassifier } from "../nn/model.ts";
import { loadCheckpoint } from "../train/checkpoint.ts";
import { InputError } from "../util/errors.ts";

/** A model to evaluate, as analyze and attack load it. The caller disposes `model`. */
export interface EvaluatedModel {
  model: TransformerClassifier;
  /** What the model is, for messages and result files: the checkpoint folder, or "PRESET (random init, seed S)". */
  source: string;
  /** A text checkpoint's tokenizer (null for ViTs and random-init models). */
  tokenizer: WordTokenizer | null;
  /** The checkpoint's data record and training fingerprints (null for a random-init model). */
  trained: TrainedData | null;
}

/**
 * The model a command evaluates: the checkpoint's (with its tokenizer and data record) when a
 * folder is given, else the preset initialised with `seed`.
 *
 * @param who the command, for messages ("analyze", "attack").
 * @throws CheckpointError on a broken checkpoint; InputError `WHO: --model: ...` on an
 *   unknown preset.
 * @example const { model, source } = await evaluatedModel("analyze", undefined, "vit-micro", 0); model.dispose();
 */
export async function evaluatedModel(
  who: string,
  checkpoint: string | undefined,
  preset: string,
  seed: number,
): Promise<EvaluatedModel> {
  if (checkpoint !== undefined) {
    const ckpt = await loadCheckpoint(checkpoint);
    return {
      model: ckpt.model as TransformerClassifier,
      source: checkpoint,
      tokenizer: ckpt.tokenizer,
      trained: trainedData(ckpt),
    };
  }
  let config;
  try {
    config = modelPreset(preset);
  } catch (error) {
    throw new InputError(`${who}: --model: ${(error as Error).message}`);
  }
  return {
    model: createModel(config, seed) as TransformerClassifier,
    source: `${preset} (random init, seed ${seed})`,
    tokenizer: null,
    trained: null,
  };
}
