import type { VitConfig } from "../nn/config.ts";
import type { TensorEntry } from "./tensorMap.ts";
import { HfImportError, hfActivation, hfField, hfLabels, type HfArchitecture } from "./types.ts";

/**
 * Hugging Face `ViTForImageClassification` (transformers' modeling_vit.py): a pre-LN ViT with a
 * Conv2d patch embedding (kernel = stride = patch size), CLS token, learned position
 * embeddings, exact GELU by default, a final LayerNorm and a linear classifier on the CLS
 * token. attnlip's "vit" model computes the same function: the Conv2d with kernel = stride is
 * a linear map of each flattened patch, and the input images are [b, H, W, C] pixels where the
 * library takes pixel_values [b, C, H, W] (the same values; attnlip applies no image processor).
 *
 * @example
 *   const config = vitForImageClassification.config(JSON.parse(configText), "analyze");
 */
export const vitForImageClassification: HfArchitecture = {
  name: "ViTForImageClassification",
  modelType: "vit",
  config(hf, who) {
    const imageSize = hfField(hf, "image_size", "size", who);
    const patchSize = hfField(hf, "patch_size", "size", who);
    if (imageSize % patchSize !== 0)
      throw new HfImportError(`${who}: config.json: image_size ${imageSize} is not a multiple of patch_size ${patchSize}`);
    return {
      kind: "vit",
      imageSize,
      channels: hfField(hf, "num_channels", "size", who, 3),
      patchSize,
      dModel: hfField(hf, "hidden_size", "size", who),
      heads: hfField(hf, "num_attention_heads", "size", who),
      blocks: hfField(hf, "num_hidden_layers", "size", who),
      mlpHidden: hfField(hf, "intermediate_size", "size", who),
      classes: hfLabels(hf, who),
      qkvBias: hfField(hf, "qkv_bias", "boolean", who, true),
      norm: "pre",
      lnEps: hfField(hf, "layer_norm_eps", "positive", who, 1e-12),
      activation: hfActivation(hf, "hidden_act", who),
      dropout: 0,
    };
  },
  tensors(config) {
    if (config.kind !== "vit") throw new TypeError("vitForImageClassification: a vit config is needed");
    const { dModel: d, channels, patchSize: p, imageSize, blocks, mlpHidden, classes, qkvBias } = config;
    const tokens = (imageSize / p) ** 2 + 1;
    const out: TensorEntry[] = [
      { hf: "vit.embeddings.patch_embeddings.projection.weight", shape: [d, channels, p, p], at: "patch.w", layout: "conv" },
      { hf: "vit.embeddings.patch_embeddings.projection.bias", shape: [d], at: "patch.b", layout: "same" },
      { hf: "vit.embeddings.cls_token", shape: [1, 1, d], at: "cls", layout: "same", atShape: [1, d] },
      { hf: "vit.embeddings.position_embeddings", shape: [1, tokens, d], at: "pos", layout: "same", atShape: [tokens, d] },
    ];
    for (let i = 0; i < blocks; i++) {
      const hf = `vit.encoder.layer.${i}`;
      const at = `blocks.${i}`;
      for (const [m, name] of [["q", "query"], ["k", "key"], ["v", "value"]] as const) {
        out.push({ hf: `${hf}.attention.attention.${name}.weight`, shape: [d, d], at: `${at}.attn.w${m}`, layout: "transpose" });
        if (qkvBias) out.push({ hf: `${hf}.attention.attention.${name}.bias`, shape: [d], at: `${at}.attn.b${m}`, layout: "same" });
      }
      out.push(
        { hf: `${hf}.attention.output.dense.weight`, shape: [d, d], at: `${at}.attn.wo`, layout: "transpose" },
        { hf: `${hf}.attention.output.dense.bias`, shape: [d], at: `${at}.attn.bo`, layout: "same" },
        { hf: `${hf}.layernorm_before.weight`, shape: [d], at: `${at}.ln1.gamma`, layout: "same" },
        { hf: `${hf}.layernorm_before.bias`, shape: [d], at: `${at}.ln1.beta`, layout: "same" },
        { hf: `${hf}.layernorm_after.weight`, shape: [d], at: `${at}.ln2.gamma`, layout: "same" },
        { hf: `${hf}.layernorm_after.bias`, shape: [d], at: `${at}.ln2.beta`, layout: "same" },
        { hf: `${hf}.intermediate.dense.weight`, shape: [mlpHidden, d], at: `${at}.mlp.w1`, layout: "transpose" },
        { hf: `${hf}.intermediate.dense.bias`, shape: [mlpHidden], at: `${at}.mlp.b1`, layout: "same" },
        { hf: `${hf}.output.dense.weight`, shape: [d, mlpHidden], at: `${at}.mlp.w2`, layout: "transpose" },
        { hf: `${hf}.output.dense.bias`, shape: [d], at: `${at}.mlp.b2`, layout: "same" },
      );
    }
    out.push(
      { hf: "vit.layernorm.weight", shape: [d], at: "norm.gamma", layout: "same" },
      { hf: "vit.layernorm.bias", shape: [d], at: "norm.beta", layout: "same" },
      { hf: "classifier.weight", shape: [classes, d], at: "head.w", layout: "transpose" },
      { hf: "classifier.bias", shape: [classes], at: "head.b", layout: "same" },
    );
    return out;
  },
};

/**
 * A ViTForImageClassification config.json for an attnlip-trained ViT (for export): its sizes,
 * activation ("gelu" for exact GELU, "gelu_pytorch_tanh" for the tanh form), LayerNorm eps,
 * biases, and the class names as id2label.
 *
 * @param labels class names (default "0", "1", ...).
 * @throws HfImportError for a post-LN ViT (Hugging Face's ViT is pre-LN).
 * @example vitHfConfig(modelPreset("vit-tiny"), undefined, "export").hidden_size // 64
 */
export function vitHfConfig(config: VitConfig, labels: readonly string[] | undefined, who: string): Record<string, unknown> {
  if (config.norm !== "pre") throw new HfImportError(`${who}: a post-LN ViT has no Hugging Face equivalent (ViTForImageClassification is pre-LN)`);
  if (config.attention === "l2") throw new HfImportError(`${who}: a ViT with L2 attention has no Hugging Face equivalent (ViTForImageClassification has dot-product attention)`);
  const names = Array.from({ length: config.classes }, (_, i) => labels?.[i] ?? String(i));
  return {
    architectures: ["ViTForImageClassification"],
    model_type: "vit",
    attention_probs_dropout_prob: 0,
    dtype: "float32",
    encoder_stride: config.patchSize,
    hidden_act: config.activation === "gelu-erf" ? "gelu" : "gelu_pytorch_tanh",
    hidden_dropout_prob: 0,
    hidden_size: config.dModel,
    id2label: Object.fromEntries(names.map((n, i) => [String(i), n])),
    image_size: config.imageSize,
    initializer_range: 0.02,
    intermediate_size: config.mlpHidden,
    label2id: Object.fromEntries(names.map((n, i) => [n, i])),
    layer_norm_eps: config.lnEps,
    num_attention_heads: config.heads,
    num_channels: config.channels,
    num_hidden_layers: config.blocks,
    patch_size: config.patchSize,
    qkv_bias: config.qkvBias,
  };
}
