import { tf } from "../../backend.ts";
import type { AttentionParams } from "../../nn/attention.ts";
import { blockAttention, blockParams, transformerBlock } from "../../nn/block.ts";
import type { L2AttentionParams } from "../../nn/l2Attention.ts";
import { allowedKeys, maskOffset } from "../../nn/mask.ts";
import type { TransformerClassifier } from "../../nn/model.ts";
import { outputShape, type TensorFn } from "./jacobianProducts.ts";
import {
  linearMapLipschitz,
  powerIterationLipschitz,
  type LinearProducts,
  type PowerIterationOptions,
  type PowerIterationResult,
} from "./lanczos.ts";
import {
  linearizeAttention,
  linearizeBlock,
  linearizeHead,
  type Linearization,
} from "./linearize.ts";

export {
  linearMapLipschitz,
  normalize,
  powerIterationLipschitz,
  TRUTH_METHOD,
  type LinearProducts,
  type PowerIterationOptions,
  type PowerIterationResult,
} from "./lanczos.ts";

/**
 * Power iteration for the local Lipschitz constant ||Df(x)||_2 (docs/math.md section 5) of one
 * transformer block, one attention layer and one attention head of a model, and one head's map.
 * The driver (thick-restart Lanczos on Df^T Df, {@link powerIterationLipschitz} and
 * {@link linearMapLipschitz}) is in src/lipschitz/truth/lanczos.ts, re-exported here.
 */

/** Whether the model's attention is causal (text config `causal`). */
function isCausal(model: TransformerClassifier): boolean {
  return model.config.kind === "text" && model.config.causal;
}

function checkSequence(name: string, model: TransformerClassifier, seq: tf.Tensor): number {
  const d = model.config.dModel;
  if (seq.rank !== 3 || seq.shape[0] !== 1 || seq.shape[2] !== d)
    throw new RangeError(`${name}: input must be [1, n, ${d}], got [${seq.shape.join(", ")}]`);
  if (seq.dtype !== "float32")
    throw new TypeError(`${name}: input must be float32, got ${seq.dtype}`);
  return seq.shape[1] as number;
}

function checkBlockIndex(name: string, model: TransformerClassifier, i: number): void {
  if (!Number.isInteger(i) || i < 0 || i >= model.config.blocks)
    throw new RangeError(`${name}: block index ${i} is outside [0, ${model.config.blocks})`);
}

/**
 * Indices of the real rows of a padding mask [1, n] (all rows when null).
 * @throws RangeError when the mask is not [1, n] or has no real row.
 */
function realRows(name: string, mask: tf.Tensor | null | undefined, n: number): number[] {
  if (mask == null) return Array.from({ length: n }, (_, i) => i);
  if (mask.rank !== 2 || mask.shape[0] !== 1 || mask.shape[1] !== n)
    throw new RangeError(`${name}: mask must be [1, ${n}], got [${mask.shape.join(", ")}]`);
  const m = mask.dataSync();
  const rows: number[] = [];
  for (let i = 0; i < n; i++) if (m[i] !== 0) rows.push(i);
  if (rows.length === 0) throw new RangeError(`${name}: the mask has no real token`);
  return rows;
}

/**
 * Runs power iteration on `full` (a map [1, n, d] -> [1, n, e]) at `seq`, restricted to the
 * real rows when some rows are padding: input directions move only real rows and only real
 * rows of the output count (padding rows are never attended to and never pooled).
 */
function onRealRows(
  full: TensorFn,
  seq: tf.Tensor,
  rows: number[],
  options: PowerIterationOptions,
  linear: Linearization | null = null,
): PowerIterationResult {
  const n = seq.shape[1] as number;
  const d = seq.shape[2] as number;
  if (rows.length === n)
    return linear === null
      ? powerIterationLipschitz(full, seq, options)
      : linearMapLipschitz(
          linearProducts(linear.tangent, linear.cotangent, seq.shape.slice(), full, seq),
          options,
        );
  const r = rows.length;
  const sel = new Float32Array(r * n);
  rows.forEach((row, i) => (sel[i * n + row] = 1));
  const keep = new Float32Array(n);
  rows.forEach((row) => (keep[row] = 1));
  const [select, scatter, padPart, point] = tf.tidy(() => {
    const s = tf.tensor2d(sel, [r, n]);
    const st = tf.transpose(s);
    const flat = tf.reshape(seq, [n, d]);
    const pad = tf.mul(flat, tf.reshape(tf.sub(1, tf.tensor1d(keep)), [n, 1]));
    return [s, st, pad, tf.reshape(tf.matMul(s, flat), [1, r, d])];
  });
  try {
    const restrict =
      (map: TensorFn, base: tf.Tensor | null): TensorFn =>
      (e) => {
        const width = e.shape[2] as number;
        const spread = tf.matMul(scatter, tf.reshape(e, [r, width]));
        const x = tf.reshape(base === null ? spread : tf.add(base, spread), [1, n, width]);
        const y = map(x);
        const out = y.shape[2] as number;
        return tf.reshape(tf.matMul(select, tf.reshape(y, [n, out])), [1, r, out]);
      };
    const g = restrict(full, padPart);
    if (linear === null) return powerIterationLipschitz(g, point, options);
    // Df restricted to the real rows: S Df(X) S^T (the padding rows' part of X is constant).
    return linearMapLipschitz(
      linearProducts(
        restrict(linear.tangent, null),
        restrict(linear.cotangent, null),
        [1, r, d],
        g,
        point,
      ),
      options,
    );
  } finally {
    tf.dispose([select, scatter, padPart, point]);
  }
}

/**
 * The products of Df(x) for {@link linearMapLipschitz}: Df(x) t by `tangent` (forward mode at x,
 * src/lipschitz/truth/linearize.ts: about one forward pass, where the double-VJP trick costs a
 * second-order gradient) and Df(x)^T u by `cotangent` (the differentials' adjoints in reverse
 * order, about one forward pass, where tfjs's backward pass of f re-runs the forward: 0.4 s of
 * a 0.49 s product on a BERT-base block). f and x give the output's shape.
 */
function linearProducts(
  tangent: TensorFn,
  cotangent: TensorFn,
  inShape: number[],
  f: TensorFn,
  x: tf.Tensor,
): LinearProducts {
  return {
    inShape,
    outShape: outputShape(f, x),
    jvp: (t) => tf.tidy(() => tangent(t)),
    vjp: (u) => tf.tidy(() => cotangent(u)),
  };
}

/**
 * ||Df(X)||_2 of transformer block `blockIndex` (f = the whole block, residuals and LayerNorms
 * included) at its input X, by {@link powerIterationLipschitz}. With a padding mask only the
 * real-token rows are inputs and outputs (see the module wrappers' note).
 *
 * Formula source: docs/math.md section 5 "True values".
 *
 * @param blockInput float32 [1, n, d] (e.g. trace.blocks[i].input of one example).
 * @param mask optional padding mask [1, n], 1 = real token (causality comes from the config).
 * @param options as {@link powerIterationLipschitz} (cap 1000 products, residual tolerance 1e-6).
 * @returns the estimate (from below; never a bound) and how it was made: method, iterations,
 *   residual, converged (a unitless gain: output norm per input norm).
 * @throws RangeError on a bad block index, input shape or mask; as powerIterationLipschitz.
 * @example
 * const r = blockLipschitz(model, 0, trace.blocks[0].input); // one example's trace
 * if (!r.converged) console.warn(`block 0: ${r.value} after ${r.iterations} products, unconverged`);
 */
export function blockLipschitz(
  model: TransformerClassifier,
  blockIndex: number,
  blockInput: tf.Tensor,
  mask: tf.Tensor | null = null,
  options: PowerIterationOptions = {},
): PowerIterationResult {
  checkBlockIndex("blockLipschitz", model, blockIndex);
  const n = checkSequence("blockLipschitz", model, blockInput);
  const rows = realRows("blockLipschitz", mask, n);
  const allowed = allowedKeys(mask, isCausal(model), n);
  try {
    const p = blockParams(model.params, blockIndex);
    const f: TensorFn = (x) => transformerBlock(x, p, model.blockConfig, { allowed }).out;
    const linear =
      model.blockConfig.attention !== "l2" && "wk" in p.attn
        ? linearizeBlock(blockInput, p, model.blockConfig, allowed)
        : null;
    try {
      return onRealRows(f, blockInput, rows, options, linear);
    } finally {
      linear?.dispose();
    }
  } finally {
    allowed?.dispose();
  }
}

/**
 * ||Df(X)||_2 of block `blockIndex`'s multi-head attention sub-layer (output projection and its
 * bias included, no residual, no LayerNorm) at its input X = trace.blocks[i].attnInput.
 *
 * Formula source: docs/math.md section 5 "True values".
 *
 * @param attnInput float32 [1, n, d].
 * @param mask optional padding mask [1, n].
 * @returns the estimate and how it was made, as {@link blockLipschitz}.
 * @throws as {@link blockLipschitz}.
 * @example attentionLayerLipschitz(model, 0, trace.blocks[0].attnInput).value
 */
export function attentionLayerLipschitz(
  model: TransformerClassifier,
  blockIndex: number,
  attnInput: tf.Tensor,
  mask: tf.Tensor | null = null,
  options: PowerIterationOptions = {},
): PowerIterationResult {
  checkBlockIndex("attentionLayerLipschitz", model, blockIndex);
  const n = checkSequence("attentionLayerLipschitz", model, attnInput);
  const rows = realRows("attentionLayerLipschitz", mask, n);
  const allowed = allowedKeys(mask, isCausal(model), n);
  try {
    const p = blockParams(model.params, blockIndex).attn;
    const f: TensorFn = (x) => blockAttention(x, p, model.blockConfig, allowed).out;
    const linear =
      "wk" in p && model.blockConfig.attention !== "l2"
        ? linearizeAttention(attnInput, p, model.config.heads, allowed)
        : null;
    try {
      return onRealRows(f, attnInput, rows, options, linear);
    } finally {
      linear?.dispose();
    }
  } finally {
    allowed?.dispose();
  }
}

/**
 * One head's map X -> P_h V_h (docs/math.md section 2), computed from the layer weights with tfjs
 * ops: Q_h = X W_Q[:, h] + b_Q[h] (columns h*d_k .. (h+1)*d_k - 1), likewise K_h, V_h;
 * P_h = rowsoftmax(Q_h K_h^T / sqrt(d_k)) with masked keys at probability 0. Agrees with
 * multiHeadAttention's P and V (its context before W_O). Parameters without a key weight wk are
 * an L2 layer's (src/nn/l2Attention.ts, Kim et al.'s L2-MHA): K_h = Q_h = X W^{Q,h} (tied, no
 * query bias), scores -||q_i - k_j||^2 / sqrt(d_k) (computed as l2MultiHeadAttention does,
 * without the row constant) and values V_h = Q_h W^{Q,h}^T W^{V,h} / sqrt(d_k) + b_V[h]
 * (= X A^h W^{V,h} + b_V[h]), agreeing with its P and V.
 *
 * @param x float32 [b, n, d].
 * @param allowed optional mask broadcastable to [b, 1, n, n] (mask.ts), or null.
 * @returns float32 [b, n, d_k].
 * @throws RangeError when head is outside [0, heads) or d is not divisible by heads.
 * @example headOutput(x, blockParams(model.params, 0).attn, 4, 2) // head 2 of 4: [b, n, d / 4]
 */
export function headOutput(
  x: tf.Tensor,
  p: AttentionParams | L2AttentionParams,
  heads: number,
  head: number,
  allowed: tf.Tensor | null = null,
): tf.Tensor {
  return tf.tidy(() => headParts(x, p, heads, head, allowed).out);
}

/**
 * {@link headOutput} and its parts at x: queries q (before the 1/sqrt(d_k) scale), keys k, values
 * v [b, n, d_k], probabilities p [b, n, n] and out = p v (new tensors, the caller's to free).
 */
function headParts(
  x: tf.Tensor,
  p: AttentionParams | L2AttentionParams,
  heads: number,
  head: number,
  allowed: tf.Tensor | null,
): { q: tf.Tensor; k: tf.Tensor; v: tf.Tensor; p: tf.Tensor; out: tf.Tensor } {
  const [b, n, d] = x.shape as [number, number, number];
  if (d % heads !== 0) throw new RangeError(`headOutput: d = ${d} is not divisible by ${heads}`);
  if (!Number.isInteger(head) || head < 0 || head >= heads)
    throw new RangeError(`headOutput: head ${head} is outside [0, ${heads})`);
  const dk = d / heads;
  return tf.tidy(() => {
    const flat = tf.reshape(x, [b * n, d]);
    const proj = (w: tf.Tensor, bias: tf.Tensor | undefined) => {
      let y = tf.matMul(flat, tf.slice(w, [0, head * dk], [d, dk]));
      if (bias !== undefined) y = tf.add(y, tf.slice(bias, [head * dk], [dk]));
      return tf.reshape(y, [b, n, dk]);
    };
    let scores: tf.Tensor;
    let q: tf.Tensor;
    let k: tf.Tensor;
    let v: tf.Tensor;
    if ("wk" in p) {
      q = proj(p.wq, p.bq);
      v = proj(p.wv, p.bv);
      k = proj(p.wk, p.bk);
      scores = tf.matMul(tf.mul(q, 1 / Math.sqrt(dk)), k, false, true);
    } else {
      q = proj(p.wq, undefined);
      k = q;
      const wqh = tf.slice(p.wq, [0, head * dk], [d, dk]);
      const wvh = tf.slice(p.wv, [0, head * dk], [d, dk]);
      const m = tf.mul(tf.matMul(wqh, wvh, true, false), 1 / Math.sqrt(dk));
      v = tf.reshape(tf.matMul(tf.reshape(q, [b * n, dk]), m), [b, n, dk]);
      if (p.bv !== undefined) v = tf.add(v, tf.slice(p.bv, [head * dk], [dk]));
      const keyNorms = tf.reshape(tf.sum(tf.square(q), -1), [b, 1, n]);
      const cross = tf.matMul(tf.mul(q, 2), q, false, true);
      scores = tf.mul(tf.sub(cross, keyNorms), 1 / Math.sqrt(dk));
    }
    let mask3: tf.Tensor | null = null;
    if (allowed !== null) {
      const s = allowed.shape as number[];
      mask3 = tf.reshape(allowed, [s[0], s[2], s[3]]);
      scores = tf.add(scores, maskOffset(mask3));
    }
    let probs = tf.softmax(scores, -1);
    if (mask3 !== null) probs = tf.mul(probs, mask3);
    return { q, k, v, p: probs, out: tf.matMul(probs, v) };
  });
}

/**
 * ||Df_h(X)||_2 of head `head` of block `blockIndex`, f_h(X) = P_h V_h ([1, n, d_k], before the
 * output projection; for L2 attention V_h = X A^h W^{V,h} + b_V[h], {@link headOutput}), at the attention input X = trace.blocks[i].attnInput.
 *
 * Formula source: docs/math.md section 5 "True values".
 *
 * @param attnInput float32 [1, n, d].
 * @param mask optional padding mask [1, n].
 * @returns the estimate and how it was made (method, iterations, residual, converged), as
 *   {@link blockLipschitz}.
 * @throws as {@link blockLipschitz}; RangeError on a bad head index.
 * @example headLipschitz(model, 0, 1, trace.blocks[0].attnInput) // block 0, head 1
 */
export function headLipschitz(
  model: TransformerClassifier,
  blockIndex: number,
  head: number,
  attnInput: tf.Tensor,
  mask: tf.Tensor | null = null,
  options: PowerIterationOptions = {},
): PowerIterationResult {
  checkBlockIndex("headLipschitz", model, blockIndex);
  const heads = model.config.heads;
  if (!Number.isInteger(head) || head < 0 || head >= heads)
    throw new RangeError(`headLipschitz: head ${head} is outside [0, ${heads})`);
  const n = checkSequence("headLipschitz", model, attnInput);
  const rows = realRows("headLipschitz", mask, n);
  const allowed = allowedKeys(mask, isCausal(model), n);
  try {
    const p = blockParams(model.params, blockIndex).attn;
    const f: TensorFn = (x) => headOutput(x, p, heads, head, allowed);
    let linear: Linearization | null = null;
    if ("wk" in p && model.blockConfig.attention !== "l2") {
      const { out, ...parts } = headParts(attnInput, p, heads, head, allowed);
      out.dispose();
      const d = attnInput.shape[2] as number;
      const dk = d / heads;
      const columns = (w: tf.Tensor) => tf.slice(w, [0, head * dk], [d, dk]);
      linear = linearizeHead(parts, { wq: columns(p.wq), wk: columns(p.wk), wv: columns(p.wv) });
    }
    try {
      return onRealRows(f, attnInput, rows, options, linear);
    } finally {
      linear?.dispose();
    }
  } finally {
    allowed?.dispose();
  }
}
