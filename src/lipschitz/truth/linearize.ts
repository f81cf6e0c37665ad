import { tf } from "../../backend.ts";
import { multiHeadAttention, type AttentionParams } from "../../nn/attention.ts";
import type { BlockConfig, BlockParams } from "../../nn/block.ts";
import { GELU_A, GELU_C, type Activation } from "../../nn/gelu.ts";
import { mlp, type MlpParams } from "../../nn/mlp.ts";

/**
 * The Jacobian Df(X) of a transformer block, of its attention layer and of one attention head at
 * a fixed input X, as a linear map on tangents (forward mode), for the true values' Lanczos
 * runs (docs/math.md section 5, "True values").
 *
 * Why: the generic JVP (src/lipschitz/truth/jacobianProducts.ts) is the double-VJP trick, a
 * gradient of a gradient that re-runs the forward pass and differentiates the backward one: on a
 * BERT-base block at 128 tokens it took 1.48 s against 0.45 s for a VJP and 0.14 s for the
 * forward pass. X does not change during a Lanczos run, so everything that depends on X alone
 * (the attention probabilities P, Q, K, V, the LayerNorms' normalised rows and scales, the
 * activation's derivative at the MLP's pre-activations) is computed once here, and a JVP is the
 * chain of the layers' differentials (matrix products with the weights and with P), about one
 * forward pass. Its transpose J^T u is the chain of the same differentials' adjoints in reverse
 * order (`cotangent`), also about one forward pass: a backward pass through the layers by tfjs
 * (re-running the forward each time) took 0.4 s of each 0.49 s Lanczos product on that block.
 * The differentials (each the derivative of the layer's forward formula) and their adjoints:
 *
 * - LayerNorm y = gamma * (x - mean x) r + beta, r = (var x + eps)^(-1/2), x^ = (x - mean x) r:
 *   dy = gamma * r * (c - x^ mean(x^ * c)), c = dx - mean(dx), per row: dy = D (I - x^ x^T/d)
 *   (I - 1 1^T/d) dx with D = diag(gamma r), so its adjoint is g = gamma * r * u,
 *   h = g - x^ mean(x^ * g), then h - mean(h).
 * - Attention, per head: dQ = dX W_Q, dK = dX W_K, dV = dX W_V (biases are constant);
 *   dS = (dQ K^T + Q dK^T) / sqrt(d_k); dP = P * (dS - rowsum(P * dS)) (the softmax Jacobian
 *   diag(p) - p p^T of each row; a masked key has P = 0, hence dP = 0);
 *   d(P V) = dP V + P dV; then the heads' concatenation times W_O. Adjoint, from the heads'
 *   cotangent C = (u W_O^T) split by head: dP~ = C V^T, dV~ = P^T C, dS~ = P * (dP~ -
 *   rowsum(P * dP~)) (each row's softmax Jacobian is symmetric), dQ~ = dS~ K / sqrt(d_k),
 *   dK~ = dS~^T Q / sqrt(d_k), and u~ = dQ~ W_Q^T + dK~ W_K^T + dV~ W_V^T (heads joined).
 * - MLP: d out = (act'(H) * (dX W_1)) W_2, H = X W_1 + b_1 (GELU's derivative in tanh or erf form,
 *   src/nn/gelu.ts); adjoint (act'(H) * (u W_2^T)) W_1^T.
 * - Residuals add the tangents; pre-LN and post-LN blocks compose these as the forward does, and
 *   the adjoints in the reverse order.
 *
 * Dot-product attention only (an L2-attention block keeps the generic products).
 */

/** A linear map on float32 tangents (the Jacobian at the fixed point), and the tensors it keeps. */
export interface Linearization {
  /** J t: t has the input's shape; returns the output's shape (the caller owns it). */
  tangent(t: tf.Tensor): tf.Tensor;
  /** J^T u: u has the output's shape; returns the input's shape (the caller owns it). */
  cotangent(u: tf.Tensor): tf.Tensor;
  /** Frees the tensors computed at the point. */
  dispose(): void;
}

/** A layer's value at the point and its differential there (tensors kept until `kept` is freed). */
interface Step {
  out: tf.Tensor;
  tangent: (t: tf.Tensor) => tf.Tensor;
  cotangent: (u: tf.Tensor) => tf.Tensor;
}

/** Shape [b*n, cols] of a [b, n, cols] tensor. */
const rows2d = (t: tf.Tensor): tf.Tensor => tf.reshape(t, [-1, t.shape[t.rank - 1] as number]);

function layerNormStep(
  x: tf.Tensor,
  gamma: tf.Tensor,
  beta: tf.Tensor,
  eps: number,
  kept: tf.Tensor[],
): Step {
  // The same operations as src/nn/layerNorm.ts, so `out` is the forward's value bit for bit.
  const [out, xhat, scale] = tf.tidy(() => {
    const centered = tf.sub(x, tf.mean(x, -1, true));
    const variance = tf.mean(tf.square(centered), -1, true);
    const r = tf.rsqrt(tf.add(variance, eps));
    const normalized = tf.mul(centered, r);
    return [tf.add(tf.mul(normalized, gamma), beta), normalized, tf.mul(r, gamma)];
  });
  kept.push(out, xhat, scale);
  return {
    out,
    tangent: (t) => {
      const c = tf.sub(t, tf.mean(t, -1, true));
      return tf.mul(scale, tf.sub(c, tf.mul(xhat, tf.mean(tf.mul(xhat, c), -1, true))));
    },
    cotangent: (u) => {
      const g = tf.mul(scale, u);
      const h = tf.sub(g, tf.mul(xhat, tf.mean(tf.mul(xhat, g), -1, true)));
      return tf.sub(h, tf.mean(h, -1, true));
    },
  };
}

/**
 * The differential of attention with probabilities p [b, H, n, n], queries q and keys k
 * [b, H, n, d_k] (q before the 1/sqrt(d_k) scale), values v, given the tangents of q, k, v.
 */
function attentionTangent(
  q: tf.Tensor,
  k: tf.Tensor,
  v: tf.Tensor,
  p: tf.Tensor,
  dq: tf.Tensor,
  dk: tf.Tensor,
  dv: tf.Tensor,
): tf.Tensor {
  const scale = 1 / Math.sqrt(q.shape[q.rank - 1] as number);
  const ds = tf.mul(tf.add(tf.matMul(dq, k, false, true), tf.matMul(q, dk, false, true)), scale);
  const dp = tf.mul(p, tf.sub(ds, tf.sum(tf.mul(p, ds), -1, true)));
  return tf.add(tf.matMul(dp, v), tf.matMul(p, dv));
}

/**
 * The adjoint of {@link attentionTangent}: from the heads' output cotangent c [b, H, n, d_k] (or
 * [b, n, d_k] for one head), the cotangents of q, k, v.
 */
function attentionCotangent(
  q: tf.Tensor,
  k: tf.Tensor,
  v: tf.Tensor,
  p: tf.Tensor,
  c: tf.Tensor,
): [tf.Tensor, tf.Tensor, tf.Tensor] {
  const scale = 1 / Math.sqrt(q.shape[q.rank - 1] as number);
  const dp = tf.matMul(c, v, false, true);
  const dv = tf.matMul(p, c, true, false);
  const ds = tf.mul(p, tf.sub(dp, tf.sum(tf.mul(p, dp), -1, true)));
  return [tf.mul(tf.matMul(ds, k), scale), tf.mul(tf.matMul(ds, q, true, false), scale), dv];
}

function attentionStep(
  x: tf.Tensor,
  p: AttentionParams,
  heads: number,
  allowed: tf.Tensor | null,
  kept: tf.Tensor[],
): Step {
  const a = multiHeadAttention(x, p, heads, allowed);
  // The adjoint's products with the transposed weights, transposed once: tfjs-wasm's matMul with
  // transposeB is about 10x slower than with the weights as stored (58 against 6 ms, 128 x 768
  // by 768 x 768), and each Lanczos product would pay it.
  const [woT, wqT, wkT, wvT] = [p.wo, p.wq, p.wk, p.wv].map((w) => tf.transpose(w));
  kept.push(a.out, a.q, a.k, a.v, a.p, woT, wqT, wkT, wvT);
  const [b, n, d] = x.shape as [number, number, number];
  const dk = d / heads;
  const project = (flat: tf.Tensor, w: tf.Tensor) =>
    tf.transpose(tf.reshape(tf.matMul(flat, w), [b, n, heads, dk]), [0, 2, 1, 3]);
  return {
    out: a.out,
    tangent: (t) => {
      const flat = tf.reshape(t, [b * n, d]);
      const ctx = attentionTangent(
        a.q,
        a.k,
        a.v,
        a.p,
        project(flat, p.wq),
        project(flat, p.wk),
        project(flat, p.wv),
      );
      const joined = tf.reshape(tf.transpose(ctx, [0, 2, 1, 3]), [b * n, d]);
      return tf.reshape(tf.matMul(joined, p.wo), [b, n, d]);
    },
    cotangent: (u) => {
      const back = tf.matMul(tf.reshape(u, [b * n, d]), woT);
      const c = tf.transpose(tf.reshape(back, [b, n, heads, dk]), [0, 2, 1, 3]);
      const [dq, dkey, dv] = attentionCotangent(a.q, a.k, a.v, a.p, c);
      const join = (g: tf.Tensor, wT: tf.Tensor) =>
        tf.matMul(tf.reshape(tf.transpose(g, [0, 2, 1, 3]), [b * n, d]), wT);
      const sum = tf.addN([join(dq, wqT), join(dkey, wkT), join(dv, wvT)]);
      return tf.reshape(sum, [b, n, d]);
    },
  };
}

/** act'(h) for src/nn/mlp.ts's activations (float32 tensor ops). */
function activationDerivativeTensor(h: tf.Tensor, activation: Activation): tf.Tensor {
  return tf.tidy(() => {
    if (activation === "gelu-erf")
      return tf.add(
        tf.mul(tf.add(tf.erf(tf.mul(h, Math.SQRT1_2)), 1), 0.5),
        tf.mul(tf.mul(h, tf.exp(tf.mul(tf.square(h), -0.5))), 1 / Math.sqrt(2 * Math.PI)),
      );
    const h2 = tf.square(h);
    const t = tf.tanh(tf.mul(tf.add(h, tf.mul(tf.mul(h2, h), GELU_A)), GELU_C));
    const inner = tf.mul(tf.add(tf.mul(h2, 3 * GELU_A), 1), GELU_C);
    return tf.add(
      tf.mul(tf.add(t, 1), 0.5),
      tf.mul(tf.mul(tf.mul(h, 0.5), tf.sub(1, tf.square(t))), inner),
    );
  });
}

function mlpStep(x: tf.Tensor, p: MlpParams, activation: Activation, kept: tf.Tensor[]): Step {
  const m = mlp(x, p, activation);
  const slope = activationDerivativeTensor(m.h, activation);
  // Transposed once (see attentionStep).
  const [w1T, w2T] = [tf.transpose(p.w1), tf.transpose(p.w2)];
  kept.push(m.out, m.h, slope, w1T, w2T);
  return {
    out: m.out,
    tangent: (t) =>
      tf.reshape(tf.matMul(tf.mul(rows2d(slope), tf.matMul(rows2d(t), p.w1)), p.w2), t.shape),
    cotangent: (u) =>
      tf.reshape(tf.matMul(tf.mul(rows2d(slope), tf.matMul(rows2d(u), w2T)), w1T), u.shape),
  };
}

function linearization(
  kept: tf.Tensor[],
  tangent: (t: tf.Tensor) => tf.Tensor,
  cotangent: (u: tf.Tensor) => tf.Tensor,
): Linearization {
  return { tangent, cotangent, dispose: () => tf.dispose(kept) };
}

/**
 * Df(X) of a dot-product transformer block (src/nn/block.ts's transformerBlock, inference: no
 * dropout), pre-LN or post-LN, at X.
 *
 * @param x float32 [b, n, d] (not disposed).
 * @param allowed the attention mask the block runs with (src/nn/mask.ts), or null.
 * @returns the map t [b, n, d] -> Df(X) t [b, n, d]; dispose it when done.
 * @throws RangeError for an L2-attention block (no key weight) and as multiHeadAttention.
 * @example const lin = linearizeBlock(x, blockParams(model.params, 0), model.blockConfig, null); lin.tangent(t); lin.dispose();
 */
export function linearizeBlock(
  x: tf.Tensor,
  p: BlockParams,
  cfg: BlockConfig,
  allowed: tf.Tensor | null,
): Linearization {
  if (cfg.attention === "l2" || !("wk" in p.attn))
    throw new RangeError("linearizeBlock: dot-product attention only (an L2 block has no wk)");
  const attn = p.attn;
  const activation = cfg.activation ?? "gelu-tanh";
  const kept: tf.Tensor[] = [];
  try {
    if (cfg.norm === "pre") {
      const ln1 = layerNormStep(x, p.ln1.gamma, p.ln1.beta, cfg.lnEps, kept);
      const a = attentionStep(ln1.out, attn, cfg.heads, allowed, kept);
      const mid = tf.add(x, a.out);
      kept.push(mid);
      const ln2 = layerNormStep(mid, p.ln2.gamma, p.ln2.beta, cfg.lnEps, kept);
      const m = mlpStep(ln2.out, p.mlp, activation, kept);
      return linearization(
        kept,
        (t) =>
          tf.tidy(() => {
            const dmid = tf.add(t, a.tangent(ln1.tangent(t)));
            return tf.add(dmid, m.tangent(ln2.tangent(dmid)));
          }),
        (u) =>
          tf.tidy(() => {
            const dmid = tf.add(u, ln2.cotangent(m.cotangent(u)));
            return tf.add(dmid, ln1.cotangent(a.cotangent(dmid)));
          }),
      );
    }
    const a = attentionStep(x, attn, cfg.heads, allowed, kept);
    const sum1 = tf.add(x, a.out);
    kept.push(sum1);
    const ln1 = layerNormStep(sum1, p.ln1.gamma, p.ln1.beta, cfg.lnEps, kept);
    const m = mlpStep(ln1.out, p.mlp, activation, kept);
    const sum2 = tf.add(ln1.out, m.out);
    kept.push(sum2);
    const ln2 = layerNormStep(sum2, p.ln2.gamma, p.ln2.beta, cfg.lnEps, kept);
    return linearization(
      kept,
      (t) =>
        tf.tidy(() => {
          const u = ln1.tangent(tf.add(t, a.tangent(t)));
          return ln2.tangent(tf.add(u, m.tangent(u)));
        }),
      (u) =>
        tf.tidy(() => {
          const y = ln2.cotangent(u);
          const z = ln1.cotangent(tf.add(y, m.cotangent(y)));
          return tf.add(z, a.cotangent(z));
        }),
    );
  } catch (e) {
    tf.dispose(kept);
    throw e;
  }
}

/**
 * Df(X) of a dot-product multi-head attention layer (output projection included; its bias is
 * constant), at X.
 *
 * @param x float32 [b, n, d]. @returns t [b, n, d] -> Df(X) t; dispose it when done.
 * @throws RangeError as multiHeadAttention (e.g. no key weight).
 * @example linearizeAttention(x, blockParams(model.params, 0).attn as AttentionParams, 4, null)
 */
export function linearizeAttention(
  x: tf.Tensor,
  p: AttentionParams,
  heads: number,
  allowed: tf.Tensor | null,
): Linearization {
  const kept: tf.Tensor[] = [];
  const a = attentionStep(x, p, heads, allowed, kept);
  return linearization(
    kept,
    (t) => tf.tidy(() => a.tangent(t)),
    (u) => tf.tidy(() => a.cotangent(u)),
  );
}

/**
 * Df_h(X) of one dot-product head's map X -> P_h V_h [b, n, d_k], given that head's values at X
 * (src/lipschitz/truth/powerIteration.ts's headParts: queries before the 1/sqrt(d_k) scale,
 * keys, values [b, n, d_k], probabilities [b, n, n]) and its weight columns W_Q[:, h], W_K[:, h],
 * W_V[:, h] [d, d_k]. The tensors passed are kept by the map and freed by its dispose.
 *
 * @returns t [b, n, d] -> Df_h(X) t [b, n, d_k], and its transpose u [b, n, d_k] -> [b, n, d].
 * @example linearizeHead(parts, weights).tangent(t)
 */
export function linearizeHead(
  parts: { q: tf.Tensor; k: tf.Tensor; v: tf.Tensor; p: tf.Tensor },
  weights: { wq: tf.Tensor; wk: tf.Tensor; wv: tf.Tensor },
): Linearization {
  // Transposed once (see attentionStep).
  const [wqT, wkT, wvT] = [weights.wq, weights.wk, weights.wv].map((w) => tf.transpose(w));
  const kept = [
    parts.q,
    parts.k,
    parts.v,
    parts.p,
    weights.wq,
    weights.wk,
    weights.wv,
    wqT,
    wkT,
    wvT,
  ];
  const [b, n] = parts.q.shape as [number, number, number];
  const dk = parts.q.shape[2] as number;
  const d = weights.wq.shape[0] as number;
  return linearization(
    kept,
    (t) =>
      tf.tidy(() => {
        const flat = rows2d(t);
        const project = (w: tf.Tensor) => tf.reshape(tf.matMul(flat, w), [b, n, dk]);
        return attentionTangent(
          parts.q,
          parts.k,
          parts.v,
          parts.p,
          project(weights.wq),
          project(weights.wk),
          project(weights.wv),
        );
      }),
    (u) =>
      tf.tidy(() => {
        const [dq, dkey, dv] = attentionCotangent(parts.q, parts.k, parts.v, parts.p, u);
        const back = (g: tf.Tensor, wT: tf.Tensor) => tf.matMul(rows2d(g), wT);
        const sum = tf.addN([back(dq, wqT), back(dkey, wkT), back(dv, wvT)]);
        return tf.reshape(sum, [b, n, d]);
      }),
  );
}
