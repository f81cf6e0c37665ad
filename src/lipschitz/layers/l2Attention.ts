import type { tf } from "../../backend.ts";
import { l2MultiHeadAttention } from "../../nn/l2Attention.ts";
import type { NamedArray } from "../../nn/params.ts";
import { headRowStats } from "../rules/attentionHead.ts";
import { attentionStats, type AttentionDetail } from "./attention.ts";
import { extra, input, perVariant, setting } from "./view.ts";
import type { LayerKindSpec } from "./types.ts";

/**
 * Why an L2-attention layer has no bound: the `note` of its rule's detail, which analyses print
 * beside their tables (one sentence, no final period).
 */
export const L2_NO_BOUND =
  'L2 attention has no bound in attnlip yet: the bound variants are derived for dot-product scores and do not hold for L2 scores, and with an untied W_V and d_k < d the layer has no global Lipschitz bound either (docs/math.md section 2, "L2 self-attention"); its layers, the blocks holding them and the network get the vacuous bound Infinity';

/**
 * Float64 L2 self-attention of one sequence x [n, d] (src/nn/l2Attention.ts): per head
 * q_i = k_i = x_i W_Q[:, h] + b_Q[h], P = rowsoftmax(-||q_i - k_j||^2 / sqrt(d_k)) over allowed
 * keys (masked entries 0; a row with no allowed key gives P = 0), out = [P_h V_h]_h W_O + b_O.
 *
 * @param params wq, wv, wo [d, d], bo [d], optional bq, bv [d].
 * @param allowed optional [n * n] (row = query), nonzero = may attend.
 * @returns out [n, d] and p [heads, n, n], float64.
 * @throws RangeError when d is not divisible by heads or x is not n * d long.
 * @example l2Attention64(x, 5, 2, params).out // [5 * d]
 */
export function l2Attention64(
  x: ArrayLike<number>,
  n: number,
  heads: number,
  params: Readonly<Record<string, NamedArray>>,
  allowed?: ArrayLike<number>,
): { out: Float64Array; p: Float64Array } {
  const d = params.wq.shape[0];
  if (d % heads !== 0 || x.length !== n * d)
    throw new RangeError(
      `l2Attention64: x has ${x.length} entries, expected ${n} x ${d} (heads ${heads})`,
    );
  const dk = d / heads;
  const affine = (
    w: NamedArray,
    b: NamedArray | undefined,
    rows: ArrayLike<number>,
    cols: number,
  ) => {
    const y = new Float64Array(n * cols);
    for (let r = 0; r < n; r++)
      for (let o = 0; o < cols; o++) {
        let s = b ? b.data[o] : 0;
        for (let i = 0; i < w.shape[0]; i++) s += rows[r * w.shape[0] + i] * w.data[i * cols + o];
        y[r * cols + o] = s;
      }
    return y;
  };
  const Q = affine(params.wq, params.bq, x, d);
  const V = affine(params.wv, params.bv, x, d);
  const p = new Float64Array(heads * n * n);
  const context = new Float64Array(n * d);
  for (let h = 0; h < heads; h++)
    for (let i = 0; i < n; i++) {
      const s = new Float64Array(n).fill(-Infinity);
      let max = -Infinity;
      for (let j = 0; j < n; j++) {
        if (allowed && !allowed[i * n + j]) continue;
        let dist = 0;
        for (let c = 0; c < dk; c++) dist += (Q[i * d + h * dk + c] - Q[j * d + h * dk + c]) ** 2;
        s[j] = -dist / Math.sqrt(dk);
        max = Math.max(max, s[j]);
      }
      if (max === -Infinity) continue;
      let z = 0;
      for (let j = 0; j < n; j++) z += s[j] === -Infinity ? 0 : Math.exp(s[j] - max);
      for (let j = 0; j < n; j++) {
        const pij = s[j] === -Infinity ? 0 : Math.exp(s[j] - max) / z;
        p[(h * n + i) * n + j] = pij;
        for (let c = 0; c < dk; c++) context[i * d + h * dk + c] += pij * V[j * d + h * dk + c];
      }
    }
  return { out: affine(params.wo, params.bo, context, params.wo.shape[1]), p };
}

/**
 * Multi-head L2 self-attention (src/nn/l2Attention.ts; Kim et al. 2021). Roles wq (= W_K,
 * tied), wv, wo [d, d], bo [d], optional bq (= b_K), bv [d]; setting `heads`; extras q, k (the
 * same values as q), v [b, H, n, d_k] and p [b, H, n, n].
 * Rule: no bound ({@link L2_NO_BOUND}): the vacuous bound Infinity for every variant, so the
 * blocks and the network holding the layer are Infinity too and nothing derived for dot-product
 * scores is shown as if it held; `detail` holds each head (values Infinity) with its attention
 * statistics over the real rows, as the dot-product kind's, and `note` (L2_NO_BOUND).
 */
export const l2AttentionKind: LayerKindSpec = {
  kind: "l2Attention",
  params: { required: ["wq", "wv", "wo", "bo"], optional: ["bq", "bv"] },
  forward(x, ctx) {
    const p = ctx.params;
    const r = l2MultiHeadAttention(
      x,
      { wq: p.wq, wv: p.wv, wo: p.wo, bo: p.bo, bq: p.bq, bv: p.bv },
      setting(ctx.settings, "heads", "l2Attention") as number,
      ctx.allowed,
    );
    const extras: Record<string, tf.Tensor> = { q: r.q, k: r.k, v: r.v, p: r.p };
    return { out: r.out, extras };
  },
  reference64: (x, shape, params, settings) =>
    l2Attention64(x, shape[0], setting(settings, "heads", "l2Attention") as number, params).out,
  rule(layer) {
    const [n] = input(layer).shape;
    const p = extra(layer, "p");
    const heads = p.shape[0];
    const none = perVariant(() => Infinity, layer.options.variants);
    const detail: AttentionDetail & { note: string } = {
      note: L2_NO_BOUND,
      heads: Array.from({ length: heads }, (_, h) => ({
        values: { ...none },
        stats: attentionStats(
          headRowStats(p.data.subarray(h * n * n, (h + 1) * n * n), n, layer.mask.allowed),
          layer.mask.real,
        ),
      })),
    };
    return { value: none, detail };
  },
};
