import { tf } from "../backend.ts";
import { parseModelConfig, type ModelConfigInput, type VitConfig } from "./config.ts";
import { linear } from "./linear.ts";
import { TransformerClassifier } from "./model.ts";
import { TRACE_NAMES, type TracedLayer } from "./trace.ts";

/**
 * Vision transformer (Dosovitskiy et al. 2021): non-overlapping patches, linear patch
 * embedding, a learned CLS token, learned position embeddings, transformer blocks, a final
 * LayerNorm and a linear head on the CLS token.
 *
 * Parameters (in this order): patch.w [p*p*c, d] (rows indexed (py, px, channel) within a
 * patch), patch.b [d], cls [1, d], pos [N + 1, d] (N = (imageSize / p)^2 patches, row 0 for CLS,
 * patches in row-major order), then blocks.i.*, norm.*, head.* (model.ts).
 *
 * The patch embedding is a reshape + one rank-4 transpose + matmul, not conv2d: the wasm
 * backend has no Conv2DBackpropFilter kernel.
 */
export class VisionTransformer extends TransformerClassifier<VitConfig> {
  /**
   * @param config a ViT config (validated here).
   * @param seed initialisation seed (default 0).
   * @throws ConfigError on an invalid config or one that is not kind "vit".
   */
  constructor(config: ModelConfigInput | VitConfig, seed = 0) {
    const parsed = parseModelConfig(config);
    if (parsed.kind !== "vit")
      throw new TypeError(`VisionTransformer: config kind is "${parsed.kind}", expected "vit"`);
    super(parsed, seed);
    const c = this.config;
    const patchDim = c.patchSize * c.patchSize * c.channels;
    this.params.add(
      "patch.w",
      [patchDim, c.dModel],
      {
        kind: "glorot",
        fanIn: patchDim,
        fanOut: c.dModel,
      },
      "weight",
    );
    this.params.add("patch.b", [c.dModel], { kind: "zeros" }, "bias");
    this.params.add("cls", [1, c.dModel], { kind: "normal", std: 0.02 }, "embedding");
    this.params.add(
      "pos",
      [this.numPatches + 1, c.dModel],
      { kind: "normal", std: 0.02 },
      "embedding",
    );
    this.addEncoderParams();
  }

  /** Number of patches N = (imageSize / patchSize)^2; the sequence has N + 1 tokens. */
  get numPatches(): number {
    const g = this.config.imageSize / this.config.patchSize;
    return g * g;
  }

  /**
   * Patches [b, N, p*p*c]: images cut into p x p patches in row-major patch order, each
   * flattened in (py, px, channel) order.
   *
   * @param x float32 [b, H, W, C], [b, H*W*C], or [b, H, W] when C = 1 (values in [0, 1]).
   * @throws TypeError when x is not float32; RangeError on any other shape.
   */
  patches(x: tf.Tensor): tf.Tensor {
    const { imageSize: s, channels: c, patchSize: p } = this.config;
    if (x.dtype !== "float32") throw new TypeError(`vit: images must be float32, got ${x.dtype}`);
    const ok =
      (x.rank === 4 && x.shape[1] === s && x.shape[2] === s && x.shape[3] === c) ||
      (x.rank === 2 && x.shape[1] === s * s * c) ||
      (x.rank === 3 && c === 1 && x.shape[1] === s && x.shape[2] === s);
    if (!ok)
      throw new RangeError(
        `vit: images must be [batch, ${s}, ${s}, ${c}] or [batch, ${s * s * c}], got [${x.shape.join(", ")}]`,
      );
    const b = x.shape[0];
    const g = s / p;
    return tf.tidy(() => {
      const rows = tf.reshape(x, [b * g, p, g, p * c]);
      const grouped = tf.transpose(rows, [0, 2, 1, 3]);
      return tf.reshape(grouped, [b, g * g, p * p * c]);
    });
  }

  /**
   * The sequence entering block 0: [CLS; patches W + b] + pos, float32 [b, N + 1, d].
   *
   * @param x images, as {@link patches}.
   * @throws as {@link patches}.
   */
  embed(x: tf.Tensor): tf.Tensor {
    const pt = this.patches(x);
    return tf.tidy(() => {
      const [b, n] = pt.shape;
      const d = this.config.dModel;
      const tokens = linear(pt, this.params.get("patch.w"), this.params.get("patch.b"));
      pt.dispose();
      const cls = tf.add(tf.zeros([b, 1, d]), tf.reshape(this.params.get("cls"), [1, 1, d]));
      const seq = tf.concat([cls, tokens], 1);
      return tf.add(seq, tf.reshape(this.params.get("pos"), [1, n + 1, d]));
    });
  }

  protected checkSequence(seq: tf.Tensor): void {
    const n = this.numPatches + 1;
    if (seq.rank !== 3 || seq.shape[1] !== n || seq.shape[2] !== this.config.dModel)
      throw new RangeError(
        `vit: sequence must be [batch, ${n}, ${this.config.dModel}], got [${seq.shape.join(", ")}]`,
      );
  }

  protected get inputSpace(): "image" {
    return "image";
  }

  /** The patch embedding ("patchEmbedding", parameters patch.w and patch.b). */
  protected embeddingLayer(): TracedLayer {
    return {
      kind: "patchEmbedding",
      name: TRACE_NAMES.embedding,
      input: null,
      params: { w: "patch.w", b: "patch.b" },
    };
  }
}
