import type { DecodedTensor } from "../io/safetensors.ts";
import type { ModelConfigInput } from "../nn/config.ts";
import type { NamedArray } from "../nn/params.ts";
import {
  HfImportError,
  TensorReader,
  hfActivation,
  hfField,
  hfLabels,
  refuseUnused,
  reshaped,
  transposed,
  type HfArchitecture,
} from "./types.ts";

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
      lnEps: hfField(hf, "layer_norm_eps", "number", who, 1e-12),
      activation: hfActivation(hf, "hidden_act", who),
      dropout: 0,
    };
  },
  weights(tensors: ReadonlyMap<string, DecodedTensor>, config: ModelConfigInput, who: string): Map<string, NamedArray> {
    if (config.kind !== "vit") throw new TypeError("vitForImageClassification.weights: a vit config is needed");
    const { dModel: d, channels = 3, patchSize: p, imageSize, blocks, mlpHidden, classes } = config;
    const qkvBias = config.qkvBias ?? true;
    const r = new TensorReader(tensors, who);
    const out = new Map<string, NamedArray>();
    // Conv2d weight [d, c, p, p] -> patch.w [p*p*c, d], rows in attnlip's (py, px, channel) order.
    const conv = r.get("vit.embeddings.patch_embeddings.projection.weight", [d, channels, p, p]);
    const patch = new Float32Array(p * p * channels * d);
    for (let o = 0; o < d; o++)
      for (let ch = 0; ch < channels; ch++)
        for (let py = 0; py < p; py++)
          for (let px = 0; px < p; px++)
            patch[((py * p + px) * channels + ch) * d + o] = conv.data[((o * channels + ch) * p + py) * p + px];
    out.set("patch.w", { data: patch, shape: [p * p * channels, d] });
    out.set("patch.b", r.get("vit.embeddings.patch_embeddings.projection.bias", [d]));
    out.set("cls", reshaped(r.get("vit.embeddings.cls_token", [1, 1, d]), [1, d]));
    const tokens = (imageSize / p) ** 2 + 1;
    out.set("pos", reshaped(r.get("vit.embeddings.position_embeddings", [1, tokens, d]), [tokens, d]));
    for (let i = 0; i < blocks; i++) {
      const hf = `vit.encoder.layer.${i}`;
      const at = `blocks.${i}`;
      for (const [m, name] of [
        ["q", "query"],
        ["k", "key"],
        ["v", "value"],
      ] as const) {
        out.set(`${at}.attn.w${m}`, transposed(r.get(`${hf}.attention.attention.${name}.weight`, [d, d])));
        if (qkvBias) out.set(`${at}.attn.b${m}`, r.get(`${hf}.attention.attention.${name}.bias`, [d]));
      }
      out.set(`${at}.attn.wo`, transposed(r.get(`${hf}.attention.output.dense.weight`, [d, d])));
      out.set(`${at}.attn.bo`, r.get(`${hf}.attention.output.dense.bias`, [d]));
      out.set(`${at}.ln1.gamma`, r.get(`${hf}.layernorm_before.weight`, [d]));
      out.set(`${at}.ln1.beta`, r.get(`${hf}.layernorm_before.bias`, [d]));
      out.set(`${at}.ln2.gamma`, r.get(`${hf}.layernorm_after.weight`, [d]));
      out.set(`${at}.ln2.beta`, r.get(`${hf}.layernorm_after.bias`, [d]));
      out.set(`${at}.mlp.w1`, transposed(r.get(`${hf}.intermediate.dense.weight`, [mlpHidden, d])));
      out.set(`${at}.mlp.b1`, r.get(`${hf}.intermediate.dense.bias`, [mlpHidden]));
      out.set(`${at}.mlp.w2`, transposed(r.get(`${hf}.output.dense.weight`, [d, mlpHidden])));
      out.set(`${at}.mlp.b2`, r.get(`${hf}.output.dense.bias`, [d]));
    }
    out.set("norm.gamma", r.get("vit.layernorm.weight", [d]));
    out.set("norm.beta", r.get("vit.layernorm.bias", [d]));
    out.set("head.w", transposed(r.get("classifier.weight", [classes, d])));
    out.set("head.b", r.get("classifier.bias", [classes]));
    refuseUnused(r, "ViTForImageClassification", who);
    return out;
  },
};
