import { tf } from "../../backend.ts";
import { multiHeadAttention, type AttentionParams } from "../../nn/attention.ts";
import { blockParams, transformerBlock } from "../../nn/block.ts";
import { allowedKeys, maskOffset } from "../../nn/mask.ts";
import type { TransformerClassifier } from "../../nn/model.ts";
import { mulberry32 } from "../../nn/prng.ts";
import { jvp, outputShape, vjp, type TensorFn } from "./jacobianProducts.ts";

/**
 * Power iteration for the local Lipschitz constant ||Df(x)||_2 (docs/math.md section 5), and
 * wrappers for one transformer block, one attention layer and one attention head of a model.
 */

/** Options of {@link powerIterationLipschitz}. */
export interface PowerIterationOptions {
  /** Most iterations (each one JVP + one VJP). Default 100. */
  maxIterations?: number;
  /** Stop when |value_k - value_{k-1}| / value_k falls below this. Default 1e-6. */
  tolerance?: number;
  /** Seed of the random (standard normal) start and of restarts. Default 0. */
  seed?: number;
  /**
   * Start vector with x.size entries (default: seeded random). If the iterate collapses to
   * about 0 (the start lies in the null space of Df), the iteration restarts from a random one.
   */
  start?: ArrayLike<number>;
  /** Random restarts allowed after collapses before concluding Df(x) = 0. Default 3. */
  maxRestarts?: number;
}

/** Result of {@link powerIterationLipschitz}. */
export interface PowerIterationResult {
  /** The estimate ||Df(x) v|| for the last unit iterate v: <= ||Df(x)||_2 (an estimate, not a bound). */
  value: number;
  /** Iterations run (across restarts). */
  iterations: number;
  /** Last relative change |value_k - value_{k-1}| / value_k (Infinity after one iteration). */
  relativeChange: number;
  /** Whether relativeChange fell below the tolerance (or Df(x) is 0 in every tried direction). */
  converged: boolean;
  /** Restarts after collapsed iterates. */
  restarts: number;
}

/** Iterates whose image has norm at most this are treated as collapsed (null space). */
const COLLAPSED = 1e-30;

/**
 * Euclidean norm (float64 accumulation) and the unit vector. The zero vector (or an empty
 * one) normalises to the zero vector with norm 0, never NaN.
 *
 * @returns {unit, norm}: unit is a new Float64Array of the same length.
 * @throws Error when an entry is not finite.
 */
export function normalize(vec: ArrayLike<number>): { unit: Float64Array; norm: number } {
  let scale = 0;
  for (let i = 0; i < vec.length; i++) {
    const a = Math.abs(vec[i]);
    if (!Number.isFinite(a)) throw new Error(`normalize: entry ${i} is ${vec[i]}`);
    if (a > scale) scale = a;
  }
  const unit = new Float64Array(vec.length);
  if (scale === 0) return { unit, norm: 0 };
  let s = 0;
  for (let i = 0; i < vec.length; i++) {
    const a = vec[i] / scale;
    s += a * a;
  }
  const norm = scale * Math.sqrt(s);
  for (let i = 0; i < vec.length; i++) unit[i] = vec[i] / norm;
  return { unit, norm };
}

function randomNormal(n: number, rand: () => number): Float64Array {
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const u = Math.max(rand(), 1e-300);
    out[i] = Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * rand());
  }
  return out;
}

function positiveInt(name: string, v: number): number {
  if (!Number.isInteger(v) || v < 1)
    throw new RangeError(`power iteration: ${name} must be a positive integer, got ${v}`);
  return v;
}

/**
 * Estimates the local Lipschitz constant ||Df(x)||_2 (largest singular value of the Jacobian of
 * f at x, Euclidean norms on the flattened input and output) by power iteration on
 * Df(x)^T Df(x): v <- Df^T (Df v) / ||.||, with Df v from {@link jvp} (double-VJP trick) and
 * Df^T w from {@link vjp}, both in float32 tensors; norms and normalisation are accumulated in
 * float64 on the JS side.
 *
 * The value ||Df(x) v|| for a unit v never exceeds ||Df(x)||_2 and increases towards it from
 * below: it is an estimate, not a bound (an upper bound must come from the bound rules). The
 * speed of convergence depends on the gap between the two largest singular values; read
 * `converged` and `relativeChange`.
 *
 * The start is a seeded standard normal vector (or `options.start`). If an iterate collapses
 * (||Df v|| <= 1e-30, e.g. the softmax Jacobian at equal logits started from the all-ones
 * vector, its null space) the iteration restarts from a fresh random vector; after
 * `maxRestarts` collapses it returns value 0 with converged = true (Df(x) vanishes on every
 * tried direction).
 *
 * @param f deterministic differentiable map on float32 tensors (dropout off).
 * @param x float32 point, any shape (not disposed).
 * @returns see {@link PowerIterationResult}. Leaves tf.memory().numTensors unchanged.
 * @throws RangeError on bad options or a start of the wrong length; Error when a product is
 *   not finite (NaN/Inf in f or its gradient); TypeError when x is not float32.
 */
export function powerIterationLipschitz(
  f: TensorFn,
  x: tf.Tensor,
  options: PowerIterationOptions = {},
): PowerIterationResult {
  const maxIterations = positiveInt("maxIterations", options.maxIterations ?? 100);
  const tolerance = options.tolerance ?? 1e-6;
  if (!(tolerance >= 0))
    throw new RangeError(`power iteration: tolerance must be >= 0, got ${tolerance}`);
  const maxRestarts = options.maxRestarts ?? 3;
  if (!Number.isInteger(maxRestarts) || maxRestarts < 0)
    throw new RangeError(
      `power iteration: maxRestarts must be an integer >= 0, got ${maxRestarts}`,
    );
  if (x.dtype !== "float32")
    throw new TypeError(`power iteration: x must be float32, got ${x.dtype}`);
  const size = x.size;
  if (options.start !== undefined && options.start.length !== size)
    throw new RangeError(
      `power iteration: start has ${options.start.length} entries, x has ${size}`,
    );
  const rand = mulberry32(options.seed ?? 0);
  const outShape = outputShape(f, x);
  const shape = x.shape.slice();

  let v = normalize(options.start ?? randomNormal(size, rand)).unit;
  let restarts = 0;
  let prev = Number.NaN;
  let value = 0;
  let relativeChange = Infinity;
  let iterations = 0;
  const restart = (): boolean => {
    if (restarts >= maxRestarts) return false;
    restarts++;
    v = normalize(randomNormal(size, rand)).unit;
    prev = Number.NaN;
    relativeChange = Infinity;
    return true;
  };
  while (iterations < maxIterations) {
    iterations++;
    const w = tf.tidy(() => {
      const vt = tf.tensor(Float32Array.from(v), shape, "float32");
      return jvp(f, x, vt, outShape);
    });
    const wData = w.dataSync();
    const { norm } = normalize(wData);
    if (!(norm > COLLAPSED)) {
      w.dispose();
      if (restart()) continue;
      return { value: 0, iterations, relativeChange: 0, converged: true, restarts };
    }
    value = norm;
    const z = vjp(f, x, w);
    w.dispose();
    const zData = z.dataSync();
    z.dispose();
    const next = normalize(zData);
    relativeChange = Number.isNaN(prev) ? Infinity : Math.abs(value - prev) / value;
    prev = value;
    if (!(next.norm > COLLAPSED)) {
      if (restart()) continue;
      return { value: 0, iterations, relativeChange: 0, converged: true, restarts };
    }
    v = next.unit;
    if (relativeChange <= tolerance) break;
  }
  return { value, iterations, relativeChange, converged: relativeChange <= tolerance, restarts };
}

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
): PowerIterationResult {
  const n = seq.shape[1] as number;
  const d = seq.shape[2] as number;
  if (rows.length === n) return powerIterationLipschitz(full, seq, options);
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
    const g: TensorFn = (e) => {
      const x = tf.reshape(tf.add(padPart, tf.matMul(scatter, tf.reshape(e, [r, d]))), [1, n, d]);
      const y = full(x);
      const out = y.shape[2] as number;
      return tf.reshape(tf.matMul(select, tf.reshape(y, [n, out])), [1, r, out]);
    };
    return powerIterationLipschitz(g, point, options);
  } finally {
    tf.dispose([select, scatter, padPart, point]);
  }
}

/**
 * ||Df(X)||_2 of transformer block `blockIndex` (f = the whole block, residuals and LayerNorms
 * included) at its input X, by {@link powerIterationLipschitz}. With a padding mask only the
 * real-token rows are inputs and outputs (see the module wrappers' note).
 *
 * @param blockInput float32 [1, n, d] (e.g. trace.blocks[i].input of one example).
 * @param mask optional padding mask [1, n], 1 = real token (causality comes from the config).
 * @returns the estimate (from below; not a bound) with iterations and convergence.
 * @throws RangeError on a bad block index, input shape or mask; as powerIterationLipschitz.
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
    return onRealRows(f, blockInput, rows, options);
  } finally {
    allowed?.dispose();
  }
}

/**
 * ||Df(X)||_2 of block `blockIndex`'s multi-head attention sub-layer (output projection and its
 * bias included, no residual, no LayerNorm) at its input X = trace.blocks[i].attnInput.
 *
 * @param attnInput float32 [1, n, d].
 * @param mask optional padding mask [1, n].
 * @throws as {@link blockLipschitz}.
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
    const f: TensorFn = (x) => multiHeadAttention(x, p, model.config.heads, allowed).out;
    return onRealRows(f, attnInput, rows, options);
  } finally {
    allowed?.dispose();
  }
}

/**
 * One head's map X -> P_h V_h (docs/math.md section 2), computed from the layer weights with tfjs
 * ops: Q_h = X W_Q[:, h] + b_Q[h] (columns h*d_k .. (h+1)*d_k - 1), likewise K_h, V_h;
 * P_h = rowsoftmax(Q_h K_h^T / sqrt(d_k)) with masked keys at probability 0. Agrees with
 * multiHeadAttention's P and V (its context before W_O).
 *
 * @param x float32 [b, n, d].
 * @param allowed optional mask broadcastable to [b, 1, n, n] (mask.ts), or null.
 * @returns float32 [b, n, d_k].
 * @throws RangeError when head is outside [0, heads) or d is not divisible by heads.
 */
export function headOutput(
  x: tf.Tensor,
  p: AttentionParams,
  heads: number,
  head: number,
  allowed: tf.Tensor | null = null,
): tf.Tensor {
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
    const q = proj(p.wq, p.bq);
    const k = proj(p.wk, p.bk);
    const v = proj(p.wv, p.bv);
    let scores = tf.matMul(tf.mul(q, 1 / Math.sqrt(dk)), k, false, true);
    let mask3: tf.Tensor | null = null;
    if (allowed !== null) {
      const s = allowed.shape as number[];
      mask3 = tf.reshape(allowed, [s[0], s[2], s[3]]);
      scores = tf.add(scores, maskOffset(mask3));
    }
    let probs = tf.softmax(scores, -1);
    if (mask3 !== null) probs = tf.mul(probs, mask3);
    return tf.matMul(probs, v);
  });
}

/**
 * ||Df_h(X)||_2 of head `head` of block `blockIndex`, f_h(X) = P_h V_h ([1, n, d_k], before the
 * output projection), at the attention input X = trace.blocks[i].attnInput.
 *
 * @param attnInput float32 [1, n, d].
 * @param mask optional padding mask [1, n].
 * @throws as {@link blockLipschitz}; RangeError on a bad head index.
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
    return onRealRows(f, attnInput, rows, options);
  } finally {
    allowed?.dispose();
  }
}
