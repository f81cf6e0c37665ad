import { tf } from "../backend.ts";
import { addBlockParams, blockParams, transformerBlock, type BlockConfig } from "./block.ts";
import type { ModelConfig } from "./config.ts";
import { layerNorm } from "./layerNorm.ts";
import { linear } from "./linear.ts";
import { allowedKeys } from "./mask.ts";

export { firstToken, poolTokens } from "./pooling.ts";
import { ParamStore, type NamedArray } from "./params.ts";
import { tanhPooler } from "./pooler.ts";
import { poolTokens, type Pooling } from "./pooling.ts";
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
    const { embeddingNorm, finalNorm, pooler, headBias } = this.layout;
    if (embeddingNorm) {
      this.params.add("embedding.norm.gamma", [c.dModel], { kind: "ones" }, "norm");
      this.params.add("embedding.norm.beta", [c.dModel], { kind: "zeros" }, "norm");
    }
    for (let i = 0; i < c.blocks; i++) addBlockParams(this.params, i, this.blockConfig);
    if (finalNorm) {
      this.params.add("norm.gamma", [c.dModel], { kind: "ones" }, "norm");
      this.params.add("norm.beta", [c.dModel], { kind: "zeros" }, "norm");
    }
    if (pooler) {
      this.params.add("pooler.w", [c.dModel, c.dModel], { kind: "glorot", fanIn: c.dModel, fanOut: c.dModel }, "weight");
      this.params.add("pooler.b", [c.dModel], { kind: "zeros" }, "bias");
    }
    this.params.add("head.w", [c.dModel, c.classes], {
      kind: "glorot",
      fanIn: c.dModel,
      fanOut: c.classes,
    }, "weight");
    if (headBias) this.params.add("head.b", [c.classes], { kind: "zeros" }, "bias");
  }

  /**
   * The optional parts around the blocks (text config fields; ViTs have the defaults): a
   * LayerNorm on the embeddings (BERT), the final LayerNorm (absent in BERT), a tanh pooler
   * (BERT), the head's bias (absent in GPT-2's score).
   */
  get layout(): { embeddingNorm: boolean; finalNorm: boolean; pooler: boolean; headBias: boolean } {
    const c = this.config;
    if (c.kind !== "text") return { embeddingNorm: false, finalNorm: true, pooler: c.pooler === "tanh", headBias: true };
    return {
      embeddingNorm: c.embeddingNorm ?? false,
      finalNorm: c.finalNorm ?? true,
      pooler: c.pooler === "tanh",
      headBias: c.headBias ?? true,
    };
  }

  /** The settings every block uses. */
  get blockConfig(): BlockConfig {
    const { dModel, heads, mlpHidden, qkvBias, norm, lnEps, dropout, activation, attention } =
      this.config;
    return { dModel, heads, mlpHidden, qkvBias, norm, lnEps, dropout, activation, attention };
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
  protected get pooling(): Pooling {
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
      const layout = this.layout;
      const c = this.config;
      const layers: TracedLayer[] = [this.embeddingLayer()];
      let x = embedding;
      if (layout.embeddingNorm) {
        layers.push(normLayer(TRACE_NAMES.embeddingNorm, "layerNorm", x, "embedding.norm", { eps: c.lnEps }));
        x = layerNorm(x, this.params.get("embedding.norm.gamma"), this.params.get("embedding.norm.beta"), c.lnEps);
      }
      const blocks: BlockTrace[] = [];
      for (let i = 0; i < c.blocks; i++) {
        const r = transformerBlock(x, blockParams(this.params, i), this.blockConfig, {
          allowed,
          training: options.training,
          name: TRACE_NAMES.block(i),
        });
        blocks.push(r.trace);
        layers.push(r.layer);
        x = r.out;
      }
      const finalInput = x;
      let pooled: tf.Tensor;
      if (layout.finalNorm) {
        layers.push(normLayer(TRACE_NAMES.norm, "finalNorm", x, "norm", { eps: c.lnEps, pooling: this.pooling }));
        pooled = this.pool(layerNorm(x, this.params.get("norm.gamma"), this.params.get("norm.beta"), c.lnEps), maskF);
      } else {
        layers.push({ kind: "pool", name: TRACE_NAMES.pool, input: x, params: {}, settings: { pooling: this.pooling } });
        pooled = this.pool(x, maskF);
      }
      if (layout.pooler) {
        layers.push({ kind: "pooler", name: TRACE_NAMES.pooler, input: pooled, params: { w: "pooler.w", b: "pooler.b" } });
        pooled = tanhPooler(pooled, this.params.get("pooler.w"), this.params.get("pooler.b"));
      }
      const headB = layout.headBias ? this.params.get("head.b") : undefined;
      const out = linear(pooled, this.params.get("head.w"), headB);
      if (options.trace) {
        layers.push({
          kind: "linear",
          name: TRACE_NAMES.head,
          input: pooled,
          params: layout.headBias ? { w: "head.w", b: "head.b" } : { w: "head.w" },
        });
        box.trace = {
          layers,
          mask: maskF,
          allowed,
          inputSpace: this.inputSpace,
          embedding,
          blocks,
          finalInput,
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

/** A traced LayerNorm (kind "layerNorm" or "finalNorm") whose parameters are PREFIX.gamma and PREFIX.beta. */
function normLayer(
  name: string,
  kind: "layerNorm" | "finalNorm",
  input: tf.Tensor,
  prefix: string,
  settings: Record<string, number | string>,
): TracedLayer {
  return { kind, name, input, params: { gamma: `${prefix}.gamma`, beta: `${prefix}.beta` }, settings };
}
