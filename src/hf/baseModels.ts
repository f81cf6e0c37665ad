import type { ModelConfig, ModelConfigInput } from "../nn/config.ts";
import { bertForSequenceClassification } from "./bert.ts";
import { gpt2ForSequenceClassification } from "./gpt2.ts";
import type { TensorEntry } from "./tensorMap.ts";
import type { HfArchitecture } from "./types.ts";
import { vitForImageClassification } from "./vit.ts";

/**
 * Hugging Face base models (ViTModel, BertModel, GPT2Model): the encoder of the matching
 * classification architecture, saved without its prefix ("vit.", "bert.", "transformer.") and
 * without a classifier. attnlip adds a linear head on the pooled output (ViTModel's and
 * BertModel's tanh pooler on the first token when the file has it, else the first token;
 * GPT-2's last real token), initialised with seed 0
 * and `num_labels` outputs (2 by default): its logits are random until the head is trained
 * (`attnlip train --model DIR`); the head is not part of the format, so an export writes the
 * base model's tensors only.
 *
 * @example baseModel(bertForSequenceClassification, "BertModel", "bert.").name // "BertModel"
 */
export function baseModel(
  classifier: HfArchitecture,
  name: string,
  prefix: string,
  extra: { pooler?: boolean; tensors?: (config: ModelConfig) => TensorEntry[] } = {},
): HfArchitecture {
  return {
    name,
    modelType: classifier.modelType,
    addsHead: true,
    // A base model saved with its pooler (add_pooling_layer=True, the default) pools through it; without, the head reads the first token.
    config: (hf, who, names) =>
      ({ ...classifier.config(hf, who), pooler: extra.pooler && (names === undefined || names.has("pooler.dense.weight")) ? "tanh" : undefined }) as ModelConfigInput,
    tensors: (config) => [
      ...classifier
        .tensors(config)
        .filter((e) => e.at !== "head.w" && e.at !== "head.b")
        .map((e) => ({ ...e, hf: e.hf.startsWith(prefix) ? e.hf.slice(prefix.length) : e.hf })),
      ...(extra.tensors?.(config) ?? []),
    ],
    ignored: classifier.ignored && ((n) => classifier.ignored!(prefix + n)),
  };
}

/** ViTModel: the ViT encoder, its final LayerNorm and its tanh pooler on the CLS token. */
export const vitModel = baseModel(vitForImageClassification, "ViTModel", "vit.", {
  pooler: true,
  tensors: (config) =>
    config.kind === "vit" && config.pooler === "tanh"
      ? [
          { hf: "pooler.dense.weight", shape: [config.dModel, config.dModel], at: "pooler.w", layout: "transpose" },
          { hf: "pooler.dense.bias", shape: [config.dModel], at: "pooler.b", layout: "same" },
        ]
      : [],
});

/** BertModel: BERT's embeddings, encoder and tanh pooler on [CLS]. */
export const bertModel = baseModel(bertForSequenceClassification, "BertModel", "bert.", { pooler: true });

/** GPT2Model: GPT-2's embeddings, blocks and ln_f; the head reads the last real token. */
export const gpt2Model = baseModel(gpt2ForSequenceClassification, "GPT2Model", "transformer.");
