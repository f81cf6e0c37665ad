import type { HfArchitecture } from "./types.ts";
import { bertModel, gpt2Model, vitModel } from "./baseModels.ts";
import { bertForSequenceClassification } from "./bert.ts";
import { gpt2ForSequenceClassification } from "./gpt2.ts";
import { vitForImageClassification } from "./vit.ts";

/**
 * The Hugging Face architectures attnlip imports, by their class name in config.json's
 * `architectures`. Adding one: a file like vit.ts and a line here.
 */
export const HF_ARCHITECTURES: ReadonlyMap<string, HfArchitecture> = new Map(
  [vitForImageClassification, bertForSequenceClassification, gpt2ForSequenceClassification, vitModel, bertModel, gpt2Model].map((a) => [a.name, a]),
);
