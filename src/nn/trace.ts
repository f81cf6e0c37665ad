import type { tf } from "../backend.ts";

/**
 * What a traced forward pass keeps for the Lipschitz rules (docs/design.md, Data flow). All tensors
 * are float32; b = batch, n = tokens, d = model width, H = heads, d_k = d / H.
 */

/** One attention layer: Q, K, V per head [b, H, n, d_k] (unscaled) and probabilities P [b, H, n, n]. */
export type AttentionTrace = {
  q: tf.Tensor;
  k: tf.Tensor;
  v: tf.Tensor;
  p: tf.Tensor;
};

/**
 * One block, [b, n, d] unless noted. Pre-LN: ln1Input = input, attnInput = LN1(input),
 * ln2Input = input + attn, mlpInput = LN2(ln2Input). Post-LN: attnInput = input,
 * ln1Input = input + attn, mlpInput = LN1(ln1Input), ln2Input = mlpInput + mlp.
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

/** A whole forward pass. */
export type ForwardTrace = {
  /** The sequence entering block 0 (patches + CLS + positions, or tokens + positions), [b, n, d]. */
  embedding: tf.Tensor;
  blocks: BlockTrace[];
  /** Input of the final LayerNorm (output of the last block), [b, n, d]. */
  finalInput: tf.Tensor;
  /** Padding mask used, float32 [b, n] with 1 = real token; null when none was given. */
  mask: tf.Tensor | null;
};

function each(trace: ForwardTrace, fn: (t: tf.Tensor) => void): void {
  fn(trace.embedding);
  fn(trace.finalInput);
  if (trace.mask) fn(trace.mask);
  for (const b of trace.blocks) {
    for (const t of [b.input, b.ln1Input, b.attnInput, b.ln2Input, b.mlpInput, b.mlpPre]) fn(t);
    for (const t of [b.attn.q, b.attn.k, b.attn.v, b.attn.p]) fn(t);
  }
}

/** Every distinct tensor of a trace. */
export function traceTensors(trace: ForwardTrace): tf.Tensor[] {
  const seen = new Set<tf.Tensor>();
  each(trace, (t) => seen.add(t));
  return [...seen];
}

/** Frees every tensor of a trace (null/undefined: nothing to do). Safe to call twice. */
export function disposeTrace(trace: ForwardTrace | null | undefined): void {
  if (!trace) return;
  for (const t of traceTensors(trace)) t.dispose();
}
