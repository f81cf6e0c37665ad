import { tf } from "../backend.ts";
import { addBlockParams, blockParams, transformerBlock, type BlockConfig } from "./block.ts";
import type { ModelConfig } from "./config.ts";
import { layerNorm } from "./layerNorm.ts";
import { linear } from "./linear.ts";
import { allowedKeys } from "./mask.ts";
import { ParamStore, type NamedArray } from "./params.ts";
import {
  TRACE_NAMES,
  traceTensors,
  type BlockTrace,
  type ForwardTrace,
  type TracedLayer,
} from "./trace.ts";

/** Options of a forward pass. */
export interface ForwardOptions {
  /**
   * Return a {@link ForwardTrace}: the list of traced layers (embedding, blocks, final norm,
   * head) with the masks, and views of it; its tensors are kept (free them with disposeTrace).
   */
  trace?: boolean;
  /** Padding mask [batch, n], 1 = real token (required shape; any numeric or bool dtype). */
  mask?: tf.Tensor | null;
  /** Training mode: dropout (config.dropout) is applied when > 0. */
  training?: boolean;
}

/** Logits [batch, classes] and, when asked for, the trace (otherwise null). */
export interface ForwardResult {
  logits: tf.Tensor;
  trace: ForwardTrace | null;
}

/**
 * What ViT and the text classifier share: a {@link ParamStore}, the encoder (blocks, final
 * LayerNorm), the linear head, and the traced forward pass. Subclasses add the embedding
 * (`embed`) and the pooling.
 *
 * Parameter names shared by both: blocks.i.* (block.ts), norm.gamma, norm.beta [d],
 * head.w [d, classes], head.b [classes].
 */
export abstract class TransformerClassifier<C extends ModelConfig = ModelConfig> {
  readonly params: ParamStore;

  protected constructor(
    readonly config: C,
    seed: number,
  ) {
    this.params = new ParamStore(seed);
  }

  /** Creates the encoder and head parameters (after the subclass created its embeddings). */
  protected addEncoderParams(): void {
    const c = this.config;
    for (let i = 0; i < c.blocks; i++) addBlockParams(this.params, i, this.blockConfig);
    this.params.add("norm.gamma", [c.dModel], { kind: "ones" });
    this.params.add("norm.beta", [c.dModel], { kind: "zeros" });
    this.params.add("head.w", [c.dModel, c.classes], {
      kind: "glorot",
      fanIn: c.dModel,
      fanOut: c.classes,
    });
    this.params.add("head.b", [c.classes], { kind: "zeros" });
  }

  /** The settings every block uses. */
  get blockConfig(): BlockConfig {
    const { dModel, heads, mlpHidden, qkvBias, norm, lnEps, dropout, activation } = this.config;
    return { dModel, heads, mlpHidden, qkvBias, norm, lnEps, dropout, activation };
  }

  /** Whether attention is causal (text config `causal`; false for ViT). */
  protected get causal(): boolean {
    return false;
  }

  /**
   * The sequence entering block 0, float32 [batch, n, d], from the model's raw input.
   * @throws RangeError/TypeError on a malformed input.
   */
  abstract embed(x: tf.Tensor): tf.Tensor;

  /** Checks a sequence fed to {@link forwardFromEmbeddings}. @throws RangeError. */
  protected abstract checkSequence(seq: tf.Tensor): void;

  /** How the final LayerNorm output is pooled ({@link poolTokens}); "cls" unless the config says. */
  protected get pooling(): "cls" | "mean" {
    return "cls";
  }

  /** What the network's bounds are with respect to: "image" (ViT) or "embedding" (text). */
  protected abstract get inputSpace(): "image" | "embedding";

  /**
   * The traced layer of the embedding (named {@link TRACE_NAMES}.embedding; its input is not
   * kept): its kind and parameter names.
   */
  protected abstract embeddingLayer(): TracedLayer;

  /** Pools the final LayerNorm output [b, n, d] to [b, d] ({@link poolTokens}). */
  protected pool(final: tf.Tensor, mask: tf.Tensor | null): tf.Tensor {
    return poolTokens(final, this.pooling, mask);
  }

  /**
   * Full forward pass from the model's raw input (see the subclass for its shape).
   *
   * @returns logits float32 [batch, classes] (an ordinary tensor: dispose it or run inside
   *   tf.tidy) and the trace when `options.trace` (kept tensors; free with disposeTrace).
   * @throws RangeError/TypeError on malformed inputs or masks.
   */
  forward(x: tf.Tensor, options: ForwardOptions = {}): ForwardResult {
    const box: { trace: ForwardTrace | null } = { trace: null };
    const logits = tf.tidy(() => {
      const r = this.forwardFromEmbeddings(this.embed(x), options);
      box.trace = r.trace;
      return r.logits;
    });
    return { logits, trace: box.trace };
  }

  /**
   * Forward pass from the sequence entering block 0 (the output of {@link embed}, which
   * includes position embeddings and, for ViT, the CLS token): blocks, final LayerNorm,
   * pooling, head. Embedding-space attacks and input Jacobians differentiate through this.
   *
   * @param seq float32 [batch, n, d].
   * @returns as {@link forward}; trace.embedding is a copy of `seq`, so disposing the trace
   *   leaves `seq` alone.
   * @throws RangeError on a malformed sequence or mask.
   */
  forwardFromEmbeddings(seq: tf.Tensor, options: ForwardOptions = {}): ForwardResult {
    this.checkSequence(seq);
    if (seq.dtype !== "float32")
      throw new TypeError(`forward: sequence must be float32, got ${seq.dtype}`);
    const [b, n] = seq.shape;
    const padding = options.mask ?? null;
    if (
      padding !== null &&
      (padding.rank !== 2 || padding.shape[0] !== b || padding.shape[1] !== n)
    )
      throw new RangeError(
        `forward: mask must have shape [${b}, ${n}], got [${padding.shape.join(", ")}]`,
      );
    const box: { trace: ForwardTrace | null } = { trace: null };
    const logits = tf.tidy(() => {
      const maskF = padding === null ? null : tf.cast(tf.notEqual(padding, 0), "float32");
      const allowed = allowedKeys(maskF, this.causal, n);
      const embedding = options.trace ? tf.clone(seq) : seq;
      let x = embedding;
      const blocks: BlockTrace[] = [];
      const layers: TracedLayer[] = [this.embeddingLayer()];
      for (let i = 0; i < this.config.blocks; i++) {
        const r = transformerBlock(x, blockParams(this.params, i), this.blockConfig, {
          allowed,
          training: options.training,
          name: TRACE_NAMES.block(i),
        });
        blocks.push(r.trace);
        layers.push(r.layer);
        x = r.out;
      }
      const final = layerNorm(
        x,
        this.params.get("norm.gamma"),
        this.params.get("norm.beta"),
        this.config.lnEps,
      );
      const pooled = this.pool(final, maskF);
      const out = linear(pooled, this.params.get("head.w"), this.params.get("head.b"));
      if (options.trace) {
        layers.push(
          {
            kind: "finalNorm",
            name: TRACE_NAMES.norm,
            input: x,
            params: { gamma: "norm.gamma", beta: "norm.beta" },
            settings: { eps: this.config.lnEps, pooling: this.pooling },
          },
          {
            kind: "linear",
            name: TRACE_NAMES.head,
            input: pooled,
            params: { w: "head.w", b: "head.b" },
          },
        );
        box.trace = {
          layers,
          mask: maskF,
          allowed,
          inputSpace: this.inputSpace,
          embedding,
          blocks,
          finalInput: x,
        };
        for (const t of traceTensors(box.trace)) tf.keep(t);
      }
      return out;
    });
    return { logits, trace: box.trace };
  }

  /** Copies every parameter to the JS side (name -> {data, shape}), in creation order. */
  getWeights(): Map<string, NamedArray> {
    return this.params.getWeights();
  }

  /** Assigns parameters; see {@link ParamStore.setWeights} for the checks and what it throws. */
  setWeights(
    weights: Map<string, NamedArray> | Record<string, NamedArray>,
    options: { partial?: boolean } = {},
  ): void {
    this.params.setWeights(weights, options);
  }

  /** The trainable variables in creation order. */
  variables(): tf.Variable[] {
    return this.params.variables();
  }

  /** Frees every parameter. */
  dispose(): void {
    this.params.dispose();
  }
}

/**
 * Pooling of a final LayerNorm output: "cls" takes the first token ({@link firstToken}); "mean"
 * averages over the real tokens of `mask` (all tokens when null; an example with no real token
 * pools to 0).
 *
 * @param final float32 [b, n, d]. @param mask float32 [b, n] with 1 = real token, or null.
 * @returns float32 [b, d].
 * @example poolTokens(tf.ones([2, 3, 4]), "mean", null).shape // [2, 4]
 */
export function poolTokens(
  final: tf.Tensor,
  pooling: "cls" | "mean",
  mask: tf.Tensor | null,
): tf.Tensor {
  if (pooling === "cls") return firstToken(final);
  return tf.tidy(() => {
    if (mask === null) return tf.mean(final, 1);
    const [b, n] = mask.shape;
    const summed = tf.sum(tf.mul(final, tf.reshape(mask, [b, n, 1])), 1);
    const count = tf.maximum(tf.sum(mask, 1, true), 1);
    return tf.div(summed, count);
  });
}

/**
 * The first token's state: final[:, 0, :].
 *
 * @param final float32 [b, n, d].
 * @returns float32 [b, d].
 */
export function firstToken(final: tf.Tensor): tf.Tensor {
  const [b, , d] = final.shape;
  return tf.tidy(() => tf.reshape(tf.slice(final, [0, 0, 0], [b, 1, d]), [b, d]));
}
