import type { TensorEntry } from "./tensorMap.ts";
import { hfActivation, hfField, hfLabels, refuseSetting, type HfArchitecture } from "./types.ts";

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
      lnEps: hfField(hf, "layer_norm_eps", "positive", who, 1e-12),
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
  tensors(config) {
    if (config.kind !== "text") throw new TypeError("bertForSequenceClassification: a text config is needed");
    const { dModel: d, blocks, mlpHidden, classes, vocabSize, maxLength } = config;
    const e = "bert.embeddings";
    const out: TensorEntry[] = [
      { hf: `${e}.word_embeddings.weight`, shape: [vocabSize, d], at: "tok", layout: "same" },
      { hf: `${e}.position_embeddings.weight`, shape: [maxLength, d], at: "pos", layout: "same" },
      { hf: `${e}.token_type_embeddings.weight`, shape: [config.tokenTypes ?? 2, d], at: "type", layout: "same" },
      { hf: `${e}.LayerNorm.weight`, shape: [d], at: "embedding.norm.gamma", layout: "same" },
      { hf: `${e}.LayerNorm.bias`, shape: [d], at: "embedding.norm.beta", layout: "same" },
    ];
    for (let i = 0; i < blocks; i++) {
      const hf = `bert.encoder.layer.${i}`;
      const at = `blocks.${i}`;
      for (const [m, name] of [["q", "query"], ["k", "key"], ["v", "value"]] as const)
        out.push(
          { hf: `${hf}.attention.self.${name}.weight`, shape: [d, d], at: `${at}.attn.w${m}`, layout: "transpose" },
          { hf: `${hf}.attention.self.${name}.bias`, shape: [d], at: `${at}.attn.b${m}`, layout: "same" },
        );
      out.push(
        { hf: `${hf}.attention.output.dense.weight`, shape: [d, d], at: `${at}.attn.wo`, layout: "transpose" },
        { hf: `${hf}.attention.output.dense.bias`, shape: [d], at: `${at}.attn.bo`, layout: "same" },
        { hf: `${hf}.attention.output.LayerNorm.weight`, shape: [d], at: `${at}.ln1.gamma`, layout: "same" },
        { hf: `${hf}.attention.output.LayerNorm.bias`, shape: [d], at: `${at}.ln1.beta`, layout: "same" },
        { hf: `${hf}.intermediate.dense.weight`, shape: [mlpHidden, d], at: `${at}.mlp.w1`, layout: "transpose" },
        { hf: `${hf}.intermediate.dense.bias`, shape: [mlpHidden], at: `${at}.mlp.b1`, layout: "same" },
        { hf: `${hf}.output.dense.weight`, shape: [d, mlpHidden], at: `${at}.mlp.w2`, layout: "transpose" },
        { hf: `${hf}.output.dense.bias`, shape: [d], at: `${at}.mlp.b2`, layout: "same" },
        { hf: `${hf}.output.LayerNorm.weight`, shape: [d], at: `${at}.ln2.gamma`, layout: "same" },
        { hf: `${hf}.output.LayerNorm.bias`, shape: [d], at: `${at}.ln2.beta`, layout: "same" },
      );
    }
    if (config.pooler === "tanh")
      out.push(
        { hf: "bert.pooler.dense.weight", shape: [d, d], at: "pooler.w", layout: "transpose" },
        { hf: "bert.pooler.dense.bias", shape: [d], at: "pooler.b", layout: "same" },
      );
    out.push(
      { hf: "classifier.weight", shape: [classes, d], at: "head.w", layout: "transpose" },
      { hf: "classifier.bias", shape: [classes], at: "head.b", layout: "same" },
    );
    return out;
  },
  // Older files keep the position_ids buffer (0..max-1); it carries no weight.
  ignored: (name) => name === "bert.embeddings.position_ids",
};
