import { tf } from "../backend.ts";
import { parseModelConfig, type ModelConfigInput, type TextConfig } from "./config.ts";
import { embeddingLookup } from "./embedding.ts";
import type { Pooling } from "./pooling.ts";
import { TRACE_NAMES, type TracedLayer } from "./trace.ts";
import { TransformerClassifier, type ForwardOptions, type ForwardResult } from "./model.ts";

/**
 * Text classifier: token embeddings + learned position embeddings, transformer blocks with a
 * padding mask (optionally causal), a final LayerNorm, pooling (first token, the mean over
 * real tokens, or the last real token) and a linear head. BERT-style (Devlin et al. 2019);
 * config fields add what Hugging Face's BERT and GPT-2 have (src/hf/): segment embeddings, an
 * embedding LayerNorm, no final LayerNorm, a tanh pooler, a head without bias.
 *
 * Parameters (in this order): tok [vocabSize, d], pos [maxLength, d], type [tokenTypes, d]
 * (optional), then embedding.norm.*, blocks.i.*, norm.*, pooler.*, head.* (model.ts). Padding goes at the end of a sequence; padded tokens are never attended
 * to, so a sequence's logits do not depend on how much padding follows it.
 */
export class TextClassifier extends TransformerClassifier<TextConfig> {
  /**
   * @param config a text config (validated here).
   * @param seed initialisation seed (default 0).
   * @throws ConfigError on an invalid config; TypeError when it is not kind "text".
   */
  constructor(config: ModelConfigInput | TextConfig, seed = 0) {
    const parsed = parseModelConfig(config);
    if (parsed.kind !== "text")
      throw new TypeError(`TextClassifier: config kind is "${parsed.kind}", expected "text"`);
    super(parsed, seed);
    const c = this.config;
    this.params.add("tok", [c.vocabSize, c.dModel], { kind: "normal", std: 0.02 }, "embedding");
    this.params.add("pos", [c.maxLength, c.dModel], { kind: "normal", std: 0.02 }, "embedding");
    if (c.tokenTypes !== undefined) this.params.add("type", [c.tokenTypes, c.dModel], { kind: "normal", std: 0.02 }, "embedding");
    this.addEncoderParams();
  }

  protected override get causal(): boolean {
    return this.config.causal;
  }

  protected override get pooling(): Pooling {
    return this.config.pooling;
  }

  protected get inputSpace(): "embedding" {
    return "embedding";
  }

  /** The embedded sequence is the bounds' input: an identity factor ("tokenEmbedding"). */
  protected embeddingLayer(): TracedLayer {
    return { kind: "tokenEmbedding", name: TRACE_NAMES.embedding, input: null, params: {} };
  }

  /**
   * Token embeddings only, tok[ids], float32 [b, n, d] (gradient to `tok` works on wasm).
   *
   * @param ids int32 [b, n], 1 <= n <= maxLength, entries in [0, vocabSize).
   * @throws TypeError/RangeError on a malformed ids tensor.
   */
  tokenEmbeddings(ids: tf.Tensor): tf.Tensor {
    if (ids.rank !== 2)
      throw new RangeError(`text: ids must be [batch, n], got [${ids.shape.join(", ")}]`);
    const n = ids.shape[1] as number;
    if (n < 1 || n > this.config.maxLength)
      throw new RangeError(
        `text: sequence length ${n} is outside [1, maxLength = ${this.config.maxLength}]`,
      );
    return embeddingLookup(this.params.get("tok"), ids);
  }

  /**
   * The sequence entering the model's layers: tok[ids] + pos[0..n) (+ type[0] with token-type
   * embeddings: every token is of type 0), float32 [b, n, d]. The bounds and attacks take this
   * sum as their input; a model's embedding LayerNorm (BERT) is its first layer.
   *
   * @param ids int32 [b, n] as {@link tokenEmbeddings}.
   */
  embed(ids: tf.Tensor): tf.Tensor {
    return tf.tidy(() => this.embedTokens(this.tokenEmbeddings(ids)));
  }

  /**
   * The sequence entering the model's layers from token embeddings E (as {@link tokenEmbeddings}
   * gives them, or an attack's perturbation of them): E + pos[0..n) (+ type[0] with token-type
   * embeddings), float32 [b, n, d]. {@link embed} is embedTokens(tokenEmbeddings(ids)); the
   * embedding-space attacks call this, so that their clean point is the model's own forward.
   *
   * @param tokens float32 [b, n, d], 1 <= n <= maxLength.
   * @throws RangeError on another shape.
   * @example model.embedTokens(model.tokenEmbeddings(ids)) // = model.embed(ids)
   */
  embedTokens(tokens: tf.Tensor): tf.Tensor {
    this.checkSequence(tokens);
    return tf.tidy(() => {
      const [, n, d] = tokens.shape;
      let constant = tf.slice(this.params.get("pos"), [0, 0], [n, d]);
      if (this.config.tokenTypes !== undefined) constant = tf.add(constant, tf.slice(this.params.get("type"), [0, 0], [1, d]));
      return tf.add(tokens, tf.reshape(constant, [1, n, d]));
    });
  }

  /**
   * @param ids int32 [b, n]; options.mask [b, n] with 1 = real token (default: all real).
   * @returns logits [b, classes] and the trace when asked (see {@link TransformerClassifier.forward}).
   */
  override forward(ids: tf.Tensor, options: ForwardOptions = {}): ForwardResult {
    return super.forward(ids, options);
  }

  protected checkSequence(seq: tf.Tensor): void {
    const { maxLength, dModel } = this.config;
    if (
      seq.rank !== 3 ||
      seq.shape[2] !== dModel ||
      (seq.shape[1] as number) < 1 ||
      (seq.shape[1] as number) > maxLength
    )
      throw new RangeError(
        `text: sequence must be [batch, n <= ${maxLength}, ${dModel}], got [${seq.shape.join(", ")}]`,
      );
  }
}
