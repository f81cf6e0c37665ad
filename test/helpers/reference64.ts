import type { ModelConfig, TextConfig, VitConfig } from "../../src/nn/config.ts";
import { gelu, geluErf } from "../../src/nn/gelu.ts";
import type { NamedArray } from "../../src/nn/params.ts";

/**
 * Float64 reference forward passes in plain TypeScript (no tfjs), from the weights
 * `getWeights()` returns: the test oracle for the tfjs layers. One sequence at a time;
 * matrices are row-major Float64Arrays. Formulas as in the tfjs files (attention.ts,
 * layerNorm.ts, mlp.ts, block.ts, vit.ts, textClassifier.ts) and docs/math.md sections 2-3.
 */

/** Weights by name, as ParamStore.getWeights returns them. */
export type Weights = Map<string, NamedArray>;

function w(weights: Weights, name: string): NamedArray {
  const v = weights.get(name);
  if (v === undefined) throw new Error(`reference64: missing weight "${name}"`);
  return v;
}

/**
 * y = x W + b for `rows` rows.
 *
 * @param x [rows, in] row-major; W [in, out]; b [out] or undefined.
 * @returns Float64Array [rows, out].
 */
export function linear64(
  x: ArrayLike<number>,
  rows: number,
  W: NamedArray,
  b?: NamedArray,
): Float64Array {
  const [inDim, outDim] = W.shape;
  const y = new Float64Array(rows * outDim);
  for (let r = 0; r < rows; r++)
    for (let o = 0; o < outDim; o++) {
      let s = b ? b.data[o] : 0;
      for (let i = 0; i < inDim; i++) s += x[r * inDim + i] * W.data[i * outDim + o];
      y[r * outDim + o] = s;
    }
  return y;
}

/**
 * LayerNorm per row: gamma (x - mean) / sqrt(var + eps) + beta, var = mean of squares of (x - mean).
 *
 * @param x [rows, d]. @returns Float64Array [rows, d].
 */
export function layerNorm64(
  x: ArrayLike<number>,
  rows: number,
  gamma: NamedArray,
  beta: NamedArray,
  eps = 1e-5,
): Float64Array {
  const d = gamma.data.length;
  const y = new Float64Array(rows * d);
  for (let r = 0; r < rows; r++) {
    let mean = 0;
    for (let i = 0; i < d; i++) mean += x[r * d + i];
    mean /= d;
    let v = 0;
    for (let i = 0; i < d; i++) v += (x[r * d + i] - mean) ** 2;
    v /= d;
    const inv = 1 / Math.sqrt(v + eps);
    for (let i = 0; i < d; i++)
      y[r * d + i] = gamma.data[i] * (x[r * d + i] - mean) * inv + beta.data[i];
  }
  return y;
}

/** MLP per row: GELU(x W1 + b1) W2 + b2 (tanh GELU, or exact with "gelu-erf"). @returns {out [rows, d], h [rows, hidden]}. */
export function mlp64(
  x: ArrayLike<number>,
  rows: number,
  weights: Weights,
  prefix: string,
  activation: "gelu-tanh" | "gelu-erf" = "gelu-tanh",
): { out: Float64Array; h: Float64Array } {
  const h = linear64(x, rows, w(weights, `${prefix}.w1`), w(weights, `${prefix}.b1`));
  const a = h.map(activation === "gelu-erf" ? geluErf : gelu);
  return { out: linear64(a, rows, w(weights, `${prefix}.w2`), w(weights, `${prefix}.b2`)), h };
}

/** Result of {@link attention64}: out [n, d]; q, k, v [heads, n, dk]; p [heads, n, n]. */
export interface Attention64 {
  out: Float64Array;
  q: Float64Array;
  k: Float64Array;
  v: Float64Array;
  p: Float64Array;
}

/**
 * Multi-head self-attention of one sequence with weights `${prefix}.{wq,bq,...}`.
 *
 * @param x [n, d].
 * @param allowed optional [n * n] (row = query, column = key), nonzero = may attend. Masked
 *   probabilities are 0; a row with no allowed key gives P = 0 and a head output of 0.
 */
export function attention64(
  x: ArrayLike<number>,
  n: number,
  heads: number,
  weights: Weights,
  prefix: string,
  allowed?: ArrayLike<number>,
): Attention64 {
  const opt = (name: string) => weights.get(`${prefix}.${name}`);
  const Wq = w(weights, `${prefix}.wq`);
  const d = Wq.shape[0];
  const dk = d / heads;
  const Q = linear64(x, n, Wq, opt("bq"));
  const K = linear64(x, n, w(weights, `${prefix}.wk`), opt("bk"));
  const V = linear64(x, n, w(weights, `${prefix}.wv`), opt("bv"));
  const q = new Float64Array(heads * n * dk);
  const k = new Float64Array(heads * n * dk);
  const v = new Float64Array(heads * n * dk);
  for (let h = 0; h < heads; h++)
    for (let i = 0; i < n; i++)
      for (let c = 0; c < dk; c++) {
        q[(h * n + i) * dk + c] = Q[i * d + h * dk + c];
        k[(h * n + i) * dk + c] = K[i * d + h * dk + c];
        v[(h * n + i) * dk + c] = V[i * d + h * dk + c];
      }
  const p = new Float64Array(heads * n * n);
  const context = new Float64Array(n * d);
  const scale = 1 / Math.sqrt(dk);
  for (let h = 0; h < heads; h++)
    for (let i = 0; i < n; i++) {
      const row = new Float64Array(n);
      let max = -Infinity;
      for (let j = 0; j < n; j++) {
        if (allowed && !allowed[i * n + j]) continue;
        let s = 0;
        for (let c = 0; c < dk; c++) s += q[(h * n + i) * dk + c] * k[(h * n + j) * dk + c];
        row[j] = s * scale;
        if (row[j] > max) max = row[j];
      }
      if (max === -Infinity) continue; // fully masked row: P = 0, head output 0
      let z = 0;
      for (let j = 0; j < n; j++) {
        if (allowed && !allowed[i * n + j]) continue;
        const e = Math.exp(row[j] - max);
        p[(h * n + i) * n + j] = e;
        z += e;
      }
      for (let j = 0; j < n; j++) p[(h * n + i) * n + j] /= z;
      for (let c = 0; c < dk; c++) {
        let s = 0;
        for (let j = 0; j < n; j++) s += p[(h * n + i) * n + j] * v[(h * n + j) * dk + c];
        context[i * d + h * dk + c] = s;
      }
    }
  const out = linear64(context, n, w(weights, `${prefix}.wo`), w(weights, `${prefix}.bo`));
  return { out, q, k, v, p };
}

/**
 * Multi-head L2 self-attention (Kim et al. 2021's L2-MHA; src/nn/l2Attention.ts) of one sequence,
 * written from the paper's definition: per head, W^{Q,h} = W_Q[:, h] [d, d_k] (ONE weight
 * `${prefix}.wq`, no query bias), q_i = k_i = x_i W^{Q,h}, scores -||q_i - k_j||^2 / sqrt(d_k)
 * (the full squared distance), softmax over the allowed keys, A^h = W^{Q,h} W^{Q,h}^T / sqrt(d_k)
 * [d, d] formed explicitly, values v_j = x_j A^h W^{V,h} + b_V[h], output [P_h V_h]_h W_O + b_O.
 *
 * @param x [n, d]. @param allowed as {@link attention64}.
 * @returns as attention64 (k equal to q; v [heads, n, d_k] the values P_h averages).
 * @throws Error when the weights hold a query bias (an L2 layer has none).
 */
export function l2Attention64Ref(
  x: ArrayLike<number>,
  n: number,
  heads: number,
  weights: Weights,
  prefix: string,
  allowed?: ArrayLike<number>,
): Attention64 {
  if (weights.has(`${prefix}.bq`)) throw new Error(`${prefix}.bq: an L2 layer has no query bias`);
  const Wq = w(weights, `${prefix}.wq`);
  const Wv = w(weights, `${prefix}.wv`);
  const bv = weights.get(`${prefix}.bv`);
  const d = Wq.shape[0];
  const dk = d / heads;
  const q = new Float64Array(heads * n * dk);
  const v = new Float64Array(heads * n * dk);
  for (let h = 0; h < heads; h++) {
    // A^h = W^{Q,h} W^{Q,h}^T / sqrt(d_k) [d, d].
    const A = new Float64Array(d * d);
    for (let r = 0; r < d; r++)
      for (let c = 0; c < d; c++) {
        let s = 0;
        for (let t = 0; t < dk; t++) s += Wq.data[r * d + h * dk + t] * Wq.data[c * d + h * dk + t];
        A[r * d + c] = s / Math.sqrt(dk);
      }
    for (let i = 0; i < n; i++) {
      const xa = new Float64Array(d); // x_i A^h
      for (let c = 0; c < d; c++) for (let r = 0; r < d; r++) xa[c] += x[i * d + r] * A[r * d + c];
      for (let t = 0; t < dk; t++) {
        let sq = 0;
        let sv = bv ? bv.data[h * dk + t] : 0;
        for (let r = 0; r < d; r++) {
          sq += x[i * d + r] * Wq.data[r * d + h * dk + t];
          sv += xa[r] * Wv.data[r * d + h * dk + t];
        }
        q[(h * n + i) * dk + t] = sq;
        v[(h * n + i) * dk + t] = sv;
      }
    }
  }
  const p = new Float64Array(heads * n * n);
  const context = new Float64Array(n * d);
  for (let h = 0; h < heads; h++)
    for (let i = 0; i < n; i++) {
      const keys: number[] = [];
      for (let j = 0; j < n; j++) if (!allowed || allowed[i * n + j]) keys.push(j);
      if (keys.length === 0) continue;
      const scores = keys.map((j) => {
        let dist = 0;
        for (let c = 0; c < dk; c++)
          dist += (q[(h * n + i) * dk + c] - q[(h * n + j) * dk + c]) ** 2;
        return -dist / Math.sqrt(dk);
      });
      const top = Math.max(...scores);
      const e = scores.map((s) => Math.exp(s - top));
      const z = e.reduce((a, b) => a + b, 0);
      keys.forEach((j, t) => (p[(h * n + i) * n + j] = e[t] / z));
      for (let c = 0; c < dk; c++) {
        let s = 0;
        for (const j of keys) s += p[(h * n + i) * n + j] * v[(h * n + j) * dk + c];
        context[i * d + h * dk + c] = s;
      }
    }
  const out = linear64(context, n, w(weights, `${prefix}.wo`), w(weights, `${prefix}.bo`));
  return { out, q, k: q, v, p };
}

/**
 * {@link l2Attention64Ref} of one layer's parameters by role (wq, wv, wo [d, d], bo [d],
 * optional bv [d]), as the layer kind's rule sees them: the one float64 L2-attention forward
 * pass of the tests (the Jacobian helper l2Jacobian64.ts builds on it).
 *
 * @example l2AttentionLayer64(x, 5, 2, { wq, wv, wo, bo }).p // [2 * 5 * 5]
 */
export function l2AttentionLayer64(
  x: ArrayLike<number>,
  n: number,
  heads: number,
  params: Readonly<Record<string, NamedArray>>,
  allowed?: ArrayLike<number>,
): Attention64 {
  const weights: Weights = new Map(Object.entries(params).map(([k, v]) => [`layer.${k}`, v]));
  return l2Attention64Ref(x, n, heads, weights, "layer", allowed);
}

function add(a: Float64Array, b: Float64Array): Float64Array {
  return a.map((x, i) => x + b[i]);
}

/** Result of {@link block64}: out [n, d], the attention result and the MLP pre-activation h. */
export interface Block64 {
  out: Float64Array;
  attn: Attention64;
  h: Float64Array;
}

/**
 * One pre- or post-LN block (block.ts) of one sequence x [n, d], weights `blocks.i.*`; its
 * attention is {@link l2Attention64Ref} when cfg.attention is "l2", else {@link attention64}.
 */
export function block64(
  x: Float64Array,
  n: number,
  cfg: ModelConfig,
  weights: Weights,
  i: number,
  allowed?: ArrayLike<number>,
): Block64 {
  const pre = `blocks.${i}`;
  const ln = (t: Float64Array, which: string) =>
    layerNorm64(
      t,
      n,
      w(weights, `${pre}.${which}.gamma`),
      w(weights, `${pre}.${which}.beta`),
      cfg.lnEps,
    );
  const attention = cfg.attention === "l2" ? l2Attention64Ref : attention64;
  if (cfg.norm === "pre") {
    const attn = attention(ln(x, "ln1"), n, cfg.heads, weights, `${pre}.attn`, allowed);
    const mid = add(x, attn.out);
    const m = mlp64(ln(mid, "ln2"), n, weights, `${pre}.mlp`, cfg.activation);
    return { out: add(mid, m.out), attn, h: m.h };
  }
  const attn = attention(x, n, cfg.heads, weights, `${pre}.attn`, allowed);
  const y = ln(add(x, attn.out), "ln1");
  const m = mlp64(y, n, weights, `${pre}.mlp`, cfg.activation);
  return { out: ln(add(y, m.out), "ln2"), attn, h: m.h };
}

/** Result of a whole-model reference pass: logits [classes] and each block's result. */
export interface Forward64 {
  logits: Float64Array;
  blocks: Block64[];
}

/**
 * The layers after the embedding for one sequence seq [n, d]: the embedding LayerNorm (text
 * `embeddingNorm`), blocks, final LayerNorm (unless text `finalNorm: false`), pooling (cls,
 * mean or last real token), the tanh pooler (text `pooler`), head (bias unless `headBias: false`).
 */
export function encoderHead64(
  seq: Float64Array,
  n: number,
  cfg: ModelConfig,
  weights: Weights,
  mask?: ArrayLike<number>,
): Forward64 {
  const d = cfg.dModel;
  const causal = cfg.kind === "text" && cfg.causal;
  let allowed: Float64Array | undefined;
  if (mask || causal) {
    allowed = new Float64Array(n * n);
    for (let i = 0; i < n; i++)
      for (let j = 0; j < n; j++)
        allowed[i * n + j] = (!mask || mask[j] ? 1 : 0) * (!causal || j <= i ? 1 : 0);
  }
  const text = cfg.kind === "text" ? cfg : null;
  let x = seq;
  if (text?.embeddingNorm)
    x = layerNorm64(
      x,
      n,
      w(weights, "embedding.norm.gamma"),
      w(weights, "embedding.norm.beta"),
      cfg.lnEps,
    );
  const blocks: Block64[] = [];
  for (let i = 0; i < cfg.blocks; i++) {
    const r = block64(x, n, cfg, weights, i, allowed);
    blocks.push(r);
    x = r.out;
  }
  const final =
    text?.finalNorm === false
      ? x
      : layerNorm64(x, n, w(weights, "norm.gamma"), w(weights, "norm.beta"), cfg.lnEps);
  let pooled = final.slice(0, d);
  if (text?.pooling === "mean") {
    pooled = new Float64Array(d);
    let count = 0;
    for (let i = 0; i < n; i++) {
      if (mask && !mask[i]) continue;
      count++;
      for (let c = 0; c < d; c++) pooled[c] += final[i * d + c];
    }
    for (let c = 0; c < d; c++) pooled[c] /= Math.max(count, 1);
  }
  if (text?.pooling === "last") {
    let last = -1;
    for (let i = 0; i < n; i++) if (!mask || mask[i]) last = i;
    pooled = last < 0 ? new Float64Array(d) : final.slice(last * d, (last + 1) * d);
  }
  if (text?.pooler === "tanh")
    pooled = linear64(pooled, 1, w(weights, "pooler.w"), w(weights, "pooler.b")).map(Math.tanh);
  const headB = text?.headBias === false ? undefined : w(weights, "head.b");
  return { logits: linear64(pooled, 1, w(weights, "head.w"), headB), blocks };
}

/**
 * The embedded sequence of one image (vit.ts): the patches (p x p, flattened in (row, column,
 * channel) order) times patch.w plus patch.b, the cls row first, positions added; [n, d].
 *
 * @param image H*W*C values in (row, column, channel) order.
 */
export function vitSequence64(
  cfg: VitConfig,
  weights: Weights,
  image: ArrayLike<number>,
): Float64Array {
  const { imageSize: s, channels: c, patchSize: p, dModel: d } = cfg;
  const g = s / p;
  const N = g * g;
  const patchDim = p * p * c;
  const patches = new Float64Array(N * patchDim);
  for (let gy = 0; gy < g; gy++)
    for (let gx = 0; gx < g; gx++)
      for (let py = 0; py < p; py++)
        for (let px = 0; px < p; px++)
          for (let ch = 0; ch < c; ch++)
            patches[(gy * g + gx) * patchDim + (py * p + px) * c + ch] =
              image[((gy * p + py) * s + gx * p + px) * c + ch];
  const tokens = linear64(patches, N, w(weights, "patch.w"), w(weights, "patch.b"));
  const seq = new Float64Array((N + 1) * d);
  const cls = w(weights, "cls").data;
  const pos = w(weights, "pos").data;
  for (let i = 0; i <= N; i++)
    for (let k = 0; k < d; k++)
      seq[i * d + k] = (i === 0 ? cls[k] : tokens[(i - 1) * d + k]) + pos[i * d + k];
  return seq;
}

/**
 * ViT forward pass (vit.ts) of one image.
 *
 * @param image H*W*C values in (row, column, channel) order.
 */
export function vitForward64(
  cfg: VitConfig,
  weights: Weights,
  image: ArrayLike<number>,
): Forward64 {
  const seq = vitSequence64(cfg, weights, image);
  return encoderHead64(seq, seq.length / cfg.dModel, cfg, weights);
}

/**
 * Text forward pass (textClassifier.ts) of one sequence.
 *
 * @param ids n token ids. @param mask optional n entries, nonzero = real token.
 */
export function textForward64(
  cfg: TextConfig,
  weights: Weights,
  ids: ArrayLike<number>,
  mask?: ArrayLike<number>,
): Forward64 {
  const n = ids.length;
  const d = cfg.dModel;
  const tok = w(weights, "tok").data;
  const pos = w(weights, "pos").data;
  const seq = new Float64Array(n * d);
  const type = cfg.tokenTypes === undefined ? null : w(weights, "type").data;
  for (let i = 0; i < n; i++)
    for (let k = 0; k < d; k++)
      seq[i * d + k] = tok[ids[i] * d + k] + pos[i * d + k] + (type ? type[k] : 0);
  return encoderHead64(seq, n, cfg, weights, mask);
}
