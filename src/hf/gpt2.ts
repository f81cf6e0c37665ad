import type { DecodedTensor } from "../io/safetensors.ts";
import type { ModelConfigInput } from "../nn/config.ts";
import type { NamedArray } from "../nn/params.ts";
import {
  TensorReader,
  columns,
  hfActivation,
  hfField,
  hfLabels,
  refuseSetting,
  refuseUnused,
  transposed,
  type HfArchitecture,
} from "./types.ts";

/**
 * Hugging Face `GPT2ForSequenceClassification` (transformers' modeling_gpt2.py): token + learned
 * position embeddings, pre-LN causal blocks (GELU in its tanh form, "gelu_new"), the final
 * LayerNorm ln_f, and a linear `score` without bias on the last real token. Its attention and
 * MLP weights are Conv1D, stored [in, out] as attnlip stores them; c_attn holds W_Q, W_K, W_V
 * side by side ([d, 3d]). attnlip's "text" model with `causal`, `pooling: "last"` and
 * `headBias: false` computes the same function (the last real token is found from the padding
 * mask, not from the pad id).
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
      lnEps: hfField(hf, "layer_norm_epsilon", "number", who, 1e-5),
      activation: hfActivation(hf, "activation_function", who),
      dropout: 0,
      pooling: "last",
      causal: true,
      headBias: false,
    };
  },
  weights(tensors: ReadonlyMap<string, DecodedTensor>, config: ModelConfigInput, who: string): Map<string, NamedArray> {
    if (config.kind !== "text") throw new TypeError("gpt2ForSequenceClassification.weights: a text config is needed");
    const { dModel: d, blocks, mlpHidden, classes, vocabSize, maxLength } = config;
    const r = new TensorReader(tensors, who);
    const out = new Map<string, NamedArray>();
    out.set("tok", r.get("transformer.wte.weight", [vocabSize, d]));
    out.set("pos", r.get("transformer.wpe.weight", [maxLength, d]));
    for (let i = 0; i < blocks; i++) {
      const hf = `transformer.h.${i}`;
      const at = `blocks.${i}`;
      out.set(`${at}.ln1.gamma`, r.get(`${hf}.ln_1.weight`, [d]));
      out.set(`${at}.ln1.beta`, r.get(`${hf}.ln_1.bias`, [d]));
      const w = r.get(`${hf}.attn.c_attn.weight`, [d, 3 * d]);
      const b = r.get(`${hf}.attn.c_attn.bias`, [3 * d]);
      (["q", "k", "v"] as const).forEach((m, k) => {
        out.set(`${at}.attn.w${m}`, columns(w, k * d, d));
        out.set(`${at}.attn.b${m}`, columns(b, k * d, d));
      });
      out.set(`${at}.attn.wo`, r.get(`${hf}.attn.c_proj.weight`, [d, d]));
      out.set(`${at}.attn.bo`, r.get(`${hf}.attn.c_proj.bias`, [d]));
      out.set(`${at}.ln2.gamma`, r.get(`${hf}.ln_2.weight`, [d]));
      out.set(`${at}.ln2.beta`, r.get(`${hf}.ln_2.bias`, [d]));
      out.set(`${at}.mlp.w1`, r.get(`${hf}.mlp.c_fc.weight`, [d, mlpHidden]));
      out.set(`${at}.mlp.b1`, r.get(`${hf}.mlp.c_fc.bias`, [mlpHidden]));
      out.set(`${at}.mlp.w2`, r.get(`${hf}.mlp.c_proj.weight`, [mlpHidden, d]));
      out.set(`${at}.mlp.b2`, r.get(`${hf}.mlp.c_proj.bias`, [d]));
      // Older files keep the causal-mask buffers attn.bias / attn.masked_bias; they carry no weight.
      for (const buffer of [`${hf}.attn.bias`, `${hf}.attn.masked_bias`]) if (tensors.has(buffer)) r.used.add(buffer);
    }
    out.set("norm.gamma", r.get("transformer.ln_f.weight", [d]));
    out.set("norm.beta", r.get("transformer.ln_f.bias", [d]));
    out.set("head.w", transposed(r.get("score.weight", [classes, d])));
    refuseUnused(r, "GPT2ForSequenceClassification", who);
    return out;
  },
};
