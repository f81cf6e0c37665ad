import type { TensorEntry } from "./tensorMap.ts";
import { hfActivation, hfField, hfLabels, refuseSetting, type HfArchitecture } from "./types.ts";

/**
 * Hugging Face `GPT2ForSequenceClassification` (transformers' modeling_gpt2.py): token + learned
 * position embeddings, pre-LN causal blocks (GELU in its tanh form, "gelu_new"), the final
 * LayerNorm ln_f, and a linear `score` without bias on the last real token. Its attention and
 * MLP weights are Conv1D, stored [in, out] as attnlip stores them; c_attn holds W_Q, W_K, W_V
 * side by side ([d, 3d]). attnlip's "text" model with `causal`, `pooling: "last"` and
 * `headBias: false` computes the same function: it pools the last real token of the padding
 * mask, and the folder's tokenizer (src/hf/tokenizer.ts) ends a text's real tokens at its last
 * token whose id is not `pad_token_id`, where transformers pools (PR #35911), so
 * "free money<|endoftext|>" reads as "free money" when the pad id is <|endoftext|>.
 *
 * @example
 *   const config = gpt2ForSequenceClassification.config(JSON.parse(configText), "analyze");
 */
export const gpt2ForSequenceClassification: HfArchitecture = {
  name: "GPT2ForSequenceClassification",
  modelType: "gpt2",
  config(hf, who) {
    refuseSetting(hf, "scale_attn_weights", true, "attnlip scales attention scores by 1/sqrt(d_head)", who);
    refuseSetting(hf, "scale_attn_by_inverse_layer_idx", false, "attnlip scales attention scores by 1/sqrt(d_head) only", who);
    refuseSetting(hf, "add_cross_attention", false, "cross-attention is not imported", who);
    const d = hfField(hf, "n_embd", "size", who);
    const inner = hf.n_inner === null || hf.n_inner === undefined ? 4 * d : hfField(hf, "n_inner", "size", who);
    return {
      kind: "text",
      vocabSize: hfField(hf, "vocab_size", "size", who),
      maxLength: hfField(hf, "n_positions", "size", who),
      dModel: d,
      heads: hfField(hf, "n_head", "size", who),
      blocks: hfField(hf, "n_layer", "size", who),
      mlpHidden: inner,
      classes: hfLabels(hf, who),
      qkvBias: true,
      norm: "pre",
      lnEps: hfField(hf, "layer_norm_epsilon", "positive", who, 1e-5),
      activation: hfActivation(hf, "activation_function", who),
      dropout: 0,
      pooling: "last",
      causal: true,
      headBias: false,
    };
  },
  tensors(config) {
    if (config.kind !== "text") throw new TypeError("gpt2ForSequenceClassification: a text config is needed");
    const { dModel: d, blocks, mlpHidden, classes, vocabSize, maxLength } = config;
    const out: TensorEntry[] = [
      { hf: "transformer.wte.weight", shape: [vocabSize, d], at: "tok", layout: "same" },
      { hf: "transformer.wpe.weight", shape: [maxLength, d], at: "pos", layout: "same" },
    ];
    for (let i = 0; i < blocks; i++) {
      const hf = `transformer.h.${i}`;
      const at = `blocks.${i}`;
      out.push(
        { hf: `${hf}.ln_1.weight`, shape: [d], at: `${at}.ln1.gamma`, layout: "same" },
        { hf: `${hf}.ln_1.bias`, shape: [d], at: `${at}.ln1.beta`, layout: "same" },
        { hf: `${hf}.attn.c_attn.weight`, shape: [d, 3 * d], at: ["q", "k", "v"].map((m) => `${at}.attn.w${m}`), layout: "columns" },
        { hf: `${hf}.attn.c_attn.bias`, shape: [3 * d], at: ["q", "k", "v"].map((m) => `${at}.attn.b${m}`), layout: "columns" },
        { hf: `${hf}.attn.c_proj.weight`, shape: [d, d], at: `${at}.attn.wo`, layout: "same" },
        { hf: `${hf}.attn.c_proj.bias`, shape: [d], at: `${at}.attn.bo`, layout: "same" },
        { hf: `${hf}.ln_2.weight`, shape: [d], at: `${at}.ln2.gamma`, layout: "same" },
        { hf: `${hf}.ln_2.bias`, shape: [d], at: `${at}.ln2.beta`, layout: "same" },
        { hf: `${hf}.mlp.c_fc.weight`, shape: [d, mlpHidden], at: `${at}.mlp.w1`, layout: "same" },
        { hf: `${hf}.mlp.c_fc.bias`, shape: [mlpHidden], at: `${at}.mlp.b1`, layout: "same" },
        { hf: `${hf}.mlp.c_proj.weight`, shape: [mlpHidden, d], at: `${at}.mlp.w2`, layout: "same" },
        { hf: `${hf}.mlp.c_proj.bias`, shape: [d], at: `${at}.mlp.b2`, layout: "same" },
      );
    }
    out.push(
      { hf: "transformer.ln_f.weight", shape: [d], at: "norm.gamma", layout: "same" },
      { hf: "transformer.ln_f.bias", shape: [d], at: "norm.beta", layout: "same" },
      { hf: "score.weight", shape: [classes, d], at: "head.w", layout: "transpose" },
    );
    return out;
  },
  // Older files keep the causal-mask buffers attn.bias and attn.masked_bias; they carry no weight.
  ignored: (name) => /^transformer\.h\.\d+\.attn\.(bias|masked_bias)$/.test(name),
};
