import type { tf } from "../backend.ts";

/**
 * What a traced forward pass keeps for the Lipschitz rules (docs/design.md, Data flow): a list
 * of the layers the model declares ({@link TracedLayer}), each with its input, the names of its
 * parameters and what its rule needs beyond them (attention Q, K, V and probabilities, the MLP
 * pre-activation), plus the masks the forward pass used. All tensors are float32 with the batch
 * first; b = batch, n = tokens, d = model width, H = heads, d_k = d / H.
 */

/**
 * One traced layer. `kind` names a registered layer kind (src/lipschitz/layers/registry.ts),
 * whose rule reads this entry; `children` makes it a composite (a residual branch, a block).
 *
 * @example
 *   // The final LayerNorm of a model, as model.ts declares it:
 *   // { kind: "finalNorm", name: "norm", input: x, params: { gamma: "norm.gamma", beta: "norm.beta" },
 *   //   settings: { eps: 1e-5, pooling: "cls" } }
 */
export interface TracedLayer {
  /** The registered layer kind, e.g. "layerNorm", "attention", "residual". */
  kind: string;
  /** A name unique within the trace, e.g. "blocks.0.ln1". */
  name: string;
  /** The layer's input [b, ...] (for the blocks' sub-layers [b, n, d]); null when not kept. */
  input: tf.Tensor | null;
  /** Parameter name in the model's weights for each role of the kind (e.g. gamma -> "norm.gamma"). */
  params: Readonly<Record<string, string>>;
  /** Kind-specific tensors, batch first (attention: q, k, v [b, H, n, d_k], p [b, H, n, n]; mlp: pre [b, n, hidden]). */
  extras?: Readonly<Record<string, tf.Tensor>>;
  /** Kind-specific settings (LayerNorm eps, heads, pooling). */
  settings?: Readonly<Record<string, number | string | boolean>>;
  /** Sub-layers of a composite, in forward order. */
  children?: readonly TracedLayer[];
}

/** A list of traced layers with the masks they ran under: what networkBounds composes. */
export interface LayerTrace {
  /** The model's layers in forward order (the network is their composition). */
  layers: readonly TracedLayer[];
  /** Padding mask used, float32 [b, n] with 1 = real token; null when none was given. */
  mask: tf.Tensor | null;
  /**
   * The attention mask used, float32 broadcastable to [b, 1, n, n] (src/nn/mask.ts: [b, 1, 1, n],
   * [1, 1, n, n] or [b, 1, n, n]), 1 = may attend; null when nothing is masked.
   */
  allowed: tf.Tensor | null;
  /** What the first layer's input is: image pixels or the embedded sequence (default "embedding"). */
  inputSpace?: "image" | "embedding";
}

/** One attention layer: Q, K, V per head [b, H, n, d_k] (unscaled) and probabilities P [b, H, n, n]. */
export type AttentionTrace = {
  q: tf.Tensor;
  k: tf.Tensor;
  v: tf.Tensor;
  p: tf.Tensor;
};

/**
 * A view of one block's tensors (the same tensors as its {@link TracedLayer} entries), [b, n, d]
 * unless noted. Pre-LN: ln1Input = input, attnInput = LN1(input), ln2Input = input + attn,
 * mlpInput = LN2(ln2Input). Post-LN: attnInput = input, ln1Input = input + attn,
 * mlpInput = LN1(ln1Input), ln2Input = mlpInput + mlp.
 * Where two fields are the same tensor they share it (disposing twice is harmless).
 */
export type BlockTrace = {
  /** The block's input. */
  input: tf.Tensor;
  /** Input of the first LayerNorm. */
  ln1Input: tf.Tensor;
  /** Input of the attention sub-layer. */
  attnInput: tf.Tensor;
  /** Input of the second LayerNorm. */
  ln2Input: tf.Tensor;
  /** Input of the MLP. */
  mlpInput: tf.Tensor;
  /** MLP pre-activation h = mlpInput W1 + b1, [b, n, mlpHidden]. */
  mlpPre: tf.Tensor;
  attn: AttentionTrace;
};

/** A whole forward pass of a {@link TransformerClassifier}: the layer list and views of it. */
export type ForwardTrace = LayerTrace & {
  inputSpace: "image" | "embedding";
  /** The sequence entering block 0 (patches + CLS + positions, or tokens + positions), [b, n, d]. */
  embedding: tf.Tensor;
  /** Per block, a view of its tensors (the same tensors as in `layers`). */
  blocks: BlockTrace[];
  /** Input of the final LayerNorm (output of the last block), [b, n, d]. */
  finalInput: tf.Tensor;
};

/** Entry names the classifiers use in their traces (docs/design.md, Add a layer kind). */
export const TRACE_NAMES = {
  embedding: "embedding",
  /** The LayerNorm on the embeddings (BERT). */
  embeddingNorm: "embedding.norm",
  block: (i: number) => `blocks.${i}`,
  norm: "norm",
  /** Pooling without a final LayerNorm (BERT). */
  pool: "pool",
  /** The tanh pooler (BERT). */
  pooler: "pooler",
  head: "head",
} as const;

/**
 * Calls `fn` on every traced layer, depth first (a composite before its children).
 *
 * @example eachLayer(trace.layers, (l) => console.log(l.kind, l.name));
 */
export function eachLayer(layers: readonly TracedLayer[], fn: (layer: TracedLayer) => void): void {
  for (const l of layers) {
    fn(l);
    if (l.children) eachLayer(l.children, fn);
  }
}

/**
 * The traced layer called `name` (searched depth first), or undefined.
 *
 * @example findLayer(trace.layers, "blocks.0.attn")?.extras?.p // [b, H, n, n]
 */
export function findLayer(layers: readonly TracedLayer[], name: string): TracedLayer | undefined {
  let found: TracedLayer | undefined;
  eachLayer(layers, (l) => {
    if (found === undefined && l.name === name) found = l;
  });
  return found;
}

/**
 * The attention probabilities of every traced layer that records them (extras.p), in forward
 * order: one float32 [b, H, n, n] per attention layer (the i-th is block i's in the
 * classifiers). What JaSMin and the sigma metrics read, whatever layers the model declares.
 *
 * @example attentionProbabilities(trace).length // the model's number of attention layers
 */
export function attentionProbabilities(trace: LayerTrace): tf.Tensor[] {
  const out: tf.Tensor[] = [];
  eachLayer(trace.layers, (l) => {
    if (l.extras?.p !== undefined) out.push(l.extras.p);
  });
  return out;
}

function each(trace: LayerTrace, fn: (t: tf.Tensor) => void): void {
  if (trace.mask) fn(trace.mask);
  if (trace.allowed) fn(trace.allowed);
  eachLayer(trace.layers, (l) => {
    if (l.input) fn(l.input);
    for (const t of Object.values(l.extras ?? {})) fn(t);
  });
  const views = trace as Partial<ForwardTrace>;
  if (views.embedding) fn(views.embedding);
  if (views.finalInput) fn(views.finalInput);
  for (const b of views.blocks ?? []) {
    for (const t of [b.input, b.ln1Input, b.attnInput, b.ln2Input, b.mlpInput, b.mlpPre]) fn(t);
    for (const t of [b.attn.q, b.attn.k, b.attn.v, b.attn.p]) fn(t);
  }
}

/**
 * Every distinct tensor of a trace (layer inputs and extras, masks, views).
 *
 * @example for (const t of traceTensors(trace)) tf.keep(t);
 */
export function traceTensors(trace: LayerTrace): tf.Tensor[] {
  const seen = new Set<tf.Tensor>();
  each(trace, (t) => seen.add(t));
  return [...seen];
}

/**
 * Frees every tensor of a trace (null/undefined: nothing to do). Safe to call twice.
 *
 * @example const { logits, trace } = model.forward(x, { trace: true }); logits.dispose(); disposeTrace(trace);
 */
export function disposeTrace(trace: LayerTrace | null | undefined): void {
  if (!trace) return;
  for (const t of traceTensors(trace)) t.dispose();
}
