import type { DecodedTensor } from "../io/safetensors.ts";
import type { ModelConfigInput } from "../nn/config.ts";
import type { NamedArray } from "../nn/params.ts";
import {
  TensorReader,
  hfActivation,
  hfField,
  hfLabels,
  refuseSetting,
  refuseUnused,
  transposed,
  type HfArchitecture,
} from "./types.ts";

/**
 * Hugging Face `BertForSequenceClassification` (transformers' modeling_bert.py): word + learned
 * position + token-type embeddings (every token of type 0: one text, no pair), a LayerNorm on
 * their sum, post-LN encoder layers (LN(x + attention(x)), then LN(h + MLP(h))), exact GELU by
 * default, no final LayerNorm, the pooler tanh(W h_CLS + b) and a linear classifier. attnlip's
 * "text" model with `embeddingNorm`, `tokenTypes`, `norm: "post"`, `finalNorm: false` and
 * `pooler: "tanh"` computes the same function; the bounds' input is the summed embedding
 * (the word embeddings plus constants), so its embedding LayerNorm is the first bounded layer.
 *
 * @example
 *   const config = bertForSequenceClassification.config(JSON.parse(configText), "analyze");
 */
export const bertForSequenceClassification: HfArchitecture = {
  name: "BertForSequenceClassification",
  modelType: "bert",
  config(hf, who) {
    refuseSetting(hf, "position_embedding_type", "absolute", "attnlip has learned absolute positions", who);
    refuseSetting(hf, "is_decoder", false, "decoder models are not imported", who);
    refuseSetting(hf, "add_cross_attention", false, "cross-attention is not imported", who);
    return {
      kind: "text",
      vocabSize: hfField(hf, "vocab_size", "size", who),
      maxLength: hfField(hf, "max_position_embeddings", "size", who),
      dModel: hfField(hf, "hidden_size", "size", who),
      heads: hfField(hf, "num_attention_heads", "size", who),
      blocks: hfField(hf, "num_hidden_layers", "size", who),
      mlpHidden: hfField(hf, "intermediate_size", "size", who),
      classes: hfLabels(hf, who),
      qkvBias: true,
      norm: "post",
      lnEps: hfField(hf, "layer_norm_eps", "number", who, 1e-12),
      activation: hfActivation(hf, "hidden_act", who),
      dropout: 0,
      pooling: "cls",
      causal: false,
      tokenTypes: hfField(hf, "type_vocab_size", "size", who, 2),
      embeddingNorm: true,
      finalNorm: false,
      pooler: "tanh",
    };
  },
  weights(tensors: ReadonlyMap<string, DecodedTensor>, config: ModelConfigInput, who: string): Map<string, NamedArray> {
    if (config.kind !== "text") throw new TypeError("bertForSequenceClassification.weights: a text config is needed");
    const { dModel: d, blocks, mlpHidden, classes, vocabSize, maxLength } = config;
    const r = new TensorReader(tensors, who);
    const out = new Map<string, NamedArray>();
    const e = "bert.embeddings";
    out.set("tok", r.get(`${e}.word_embeddings.weight`, [vocabSize, d]));
    out.set("pos", r.get(`${e}.position_embeddings.weight`, [maxLength, d]));
    out.set("type", r.get(`${e}.token_type_embeddings.weight`, [config.tokenTypes ?? 2, d]));
    out.set("embedding.norm.gamma", r.get(`${e}.LayerNorm.weight`, [d]));
    out.set("embedding.norm.beta", r.get(`${e}.LayerNorm.bias`, [d]));
    for (let i = 0; i < blocks; i++) {
      const hf = `bert.encoder.layer.${i}`;
      const at = `blocks.${i}`;
      for (const [m, name] of [
        ["q", "query"],
        ["k", "key"],
        ["v", "value"],
      ] as const) {
        out.set(`${at}.attn.w${m}`, transposed(r.get(`${hf}.attention.self.${name}.weight`, [d, d])));
        out.set(`${at}.attn.b${m}`, r.get(`${hf}.attention.self.${name}.bias`, [d]));
      }
      out.set(`${at}.attn.wo`, transposed(r.get(`${hf}.attention.output.dense.weight`, [d, d])));
      out.set(`${at}.attn.bo`, r.get(`${hf}.attention.output.dense.bias`, [d]));
      out.set(`${at}.ln1.gamma`, r.get(`${hf}.attention.output.LayerNorm.weight`, [d]));
      out.set(`${at}.ln1.beta`, r.get(`${hf}.attention.output.LayerNorm.bias`, [d]));
      out.set(`${at}.mlp.w1`, transposed(r.get(`${hf}.intermediate.dense.weight`, [mlpHidden, d])));
      out.set(`${at}.mlp.b1`, r.get(`${hf}.intermediate.dense.bias`, [mlpHidden]));
      out.set(`${at}.mlp.w2`, transposed(r.get(`${hf}.output.dense.weight`, [d, mlpHidden])));
      out.set(`${at}.mlp.b2`, r.get(`${hf}.output.dense.bias`, [d]));
      out.set(`${at}.ln2.gamma`, r.get(`${hf}.output.LayerNorm.weight`, [d]));
      out.set(`${at}.ln2.beta`, r.get(`${hf}.output.LayerNorm.bias`, [d]));
    }
    out.set("pooler.w", transposed(r.get("bert.pooler.dense.weight", [d, d])));
    out.set("pooler.b", r.get("bert.pooler.dense.bias", [d]));
    out.set("head.w", transposed(r.get("classifier.weight", [classes, d])));
    out.set("head.b", r.get("classifier.bias", [classes]));
    // Older files keep the position_ids buffer; it holds 0..max-1 and carries no weight.
    if (tensors.has(`${e}.position_ids`)) r.used.add(`${e}.position_ids`);
    refuseUnused(r, "BertForSequenceClassification", who);
    return out;
  },
};
