import type { tf } from "../../backend.ts";
import { l2MultiHeadAttention } from "../../nn/l2Attention.ts";
import type { NamedArray } from "../../nn/params.ts";
import {
  headRowStats,
  L2_LOCAL_VARIANTS,
  L2_VARIANTS,
  type VariantValues,
} from "../rules/attentionHead.ts";
import { attentionLayerBound } from "../rules/attentionLayer.ts";
import { InputError } from "../../util/errors.ts";
import { kimHeadBound } from "../rules/kim.ts";
import { l2HeadBounds, l2HeadWeights, type L2HeadWeights } from "../rules/l2Head.ts";
import { weightSpectralNorm } from "../weightCache.ts";
import { attentionStats, type AttentionDetail } from "./attention.ts";
import { extra, input, perVariant, setting } from "./view.ts";
import type { LayerKindSpec } from "./types.ts";


/** Why an L2-attention layer refuses a request for dot-product variants only (an InputError: exit 2 from the CLI). */
export const DOT_ONLY_L2_REFUSED =
  'the variants asked for bound dot-product attention only, and this layer is L2 attention (their value would be Infinity): ask for "l2-dist", "l2-cov" or "kim" (docs/math.md section 2, "Local bounds of L2 attention")';

/**
 * Throws {@link DOT_ONLY_L2_REFUSED} when `variants` holds no L2 variant (L2 attention's rule
 * calls it; so does applicableVariants.ts before a command reads its data).
 *
 * @throws InputError `WHO: ...`.
 */
export function refuseDotOnlyVariants(variants: readonly string[], who: string): void {
  if (!variants.some((v) => (L2_VARIANTS as readonly string[]).includes(v)))
    throw new InputError(`${who}: ${DOT_ONLY_L2_REFUSED}`);
}

/**
 * Why an L2-attention layer has no value for the dot-product variants: the `note` of its rule's
 * detail, which analyses print beside their tables (one sentence, no final period).
 */
export const L2_NO_BOUND =
  'L2 attention: the dot-product variants (paper, t3-*, dist, cov, fused, castin) are derived for dot-product scores and do not hold for L2 scores, so they give the vacuous bound Infinity for its layers, the blocks holding them and the network; l2-dist and l2-cov are its local bounds (of the Jacobian at this input), kim is Kim et al.\'s global bound of the layer (docs/math.md section 2, "L2 self-attention" and "Local bounds of L2 attention")';

/** The note of an L2-attention layer with masked keys, for which `kim` is Infinity too. */
export const KIM_MASKED =
  'L2 attention with masked keys (padding or causal): the dot-product variants are Infinity (they do not hold for L2 scores) and so is kim, since Kim et al.\'s Theorem 3.2 is for unmasked attention, and a padded query row that is not among its own keys makes the layer not globally Lipschitz; l2-dist and l2-cov hold with masks (docs/math.md section 2, "L2 self-attention" and "Local bounds of L2 attention")';

/** Weight norms of an L2-attention layer (input-independent, cached by the driver). */
export interface L2Prepared {
  /** d_k = d / H. */
  dk: number;
  /** ||W^{Q,h}||_2 and ||W^{V,h}||_2 [d, d_k] per head. */
  wq: number[];
  wv: number[];
  /** ||W_O||_2. */
  wo: number;
  /** Per head, the weight quantities of the local variants (rules/l2Head.ts). */
  local: L2HeadWeights[];
}

/**
 * Float64 L2 self-attention of one sequence x [n, d] (src/nn/l2Attention.ts, Kim et al.'s
 * L2-MHA): per head q_i = x_i W^{Q,h}, P = rowsoftmax(-||q_i - q_j||^2 / sqrt(d_k)) over allowed
 * keys (masked entries 0; a row with no allowed key gives P = 0), values
 * v_j = q_j W^{Q,h}^T W^{V,h} / sqrt(d_k) + b_V[h] (= x_j A^h W^{V,h} + b_V[h]),
 * out = [P_h V_h]_h W_O + b_O.
 *
 * @param params wq, wv, wo [d, d], bo [d], optional bv [d].
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
  const wq = params.wq.data;
  const wv = params.wv.data;
  const Q = new Float64Array(n * d);
  for (let r = 0; r < n; r++)
    for (let o = 0; o < d; o++) {
      let s = 0;
      for (let i = 0; i < d; i++) s += x[r * d + i] * wq[i * d + o];
      Q[r * d + o] = s;
    }
  // V_h = Q_h M_h + b_V[h], M_h = W^{Q,h}^T W^{V,h} / sqrt(d_k) [d_k, d_k].
  const V = new Float64Array(n * d);
  for (let h = 0; h < heads; h++) {
    const M = new Float64Array(dk * dk);
    for (let a = 0; a < dk; a++)
      for (let c = 0; c < dk; c++) {
        let s = 0;
        for (let i = 0; i < d; i++) s += wq[i * d + h * dk + a] * wv[i * d + h * dk + c];
        M[a * dk + c] = s / Math.sqrt(dk);
      }
    for (let r = 0; r < n; r++)
      for (let c = 0; c < dk; c++) {
        let s = params.bv ? params.bv.data[h * dk + c] : 0;
        for (let a = 0; a < dk; a++) s += Q[r * d + h * dk + a] * M[a * dk + c];
        V[r * d + h * dk + c] = s;
      }
  }
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
  const out = new Float64Array(n * d);
  const wo = params.wo.data;
  for (let r = 0; r < n; r++)
    for (let o = 0; o < d; o++) {
      let s = params.bo.data[o];
      for (let i = 0; i < d; i++) s += context[r * d + i] * wo[i * d + o];
      out[r * d + o] = s;
    }
  return { out, p };
}

/** Column block h of a [d, d] weight: [d, d_k] row-major, float64. */
function columns(m: NamedArray, h: number, dk: number): Float64Array {
  const d = m.shape[0];
  const out = new Float64Array(d * dk);
  for (let i = 0; i < d; i++)
    for (let c = 0; c < dk; c++) out[i * dk + c] = m.data[i * d + h * dk + c];
  return out;
}

/**
 * Multi-head L2 self-attention (src/nn/l2Attention.ts; Kim et al. 2021's L2-MHA). Roles wq (=
 * W_K, tied, also in the value map), wv, wo [d, d], bo [d], optional bv [d]; setting `heads`;
 * extras q, k (the same values as q), v (the values X A^h W^{V,h} + b_V[h]) [b, H, n, d_k] and
 * p [b, H, n, n].
 * Rule, per head and then ||W_O|| (sum_h L_h^2)^(1/2) per variant:
 * - `l2-dist`, `l2-cov` (rules/l2Head.ts; docs/math.md section 2, "Local bounds of L2
 *   attention"): bounds on ||Df(X)|| at this input X only, from Q = X W^{Q,h} and P recomputed
 *   in float64 from the traced input (l2Attention64), with masks;
 * - `kim`, Kim et al.'s Theorem 3.2 (rules/kim.ts), per head kimHeadBound(N, d_k,
 *   ||W^{Q,h}||, ||W^{V,h}||): a bound on the layer's Lipschitz constant over ALL inputs, hence
 *   on ||Df(X)|| at this one; Infinity with the note {@link KIM_MASKED} when keys are masked;
 * - every dot-product variant gives the vacuous bound Infinity ({@link L2_NO_BOUND}).
 * `detail` holds each head's values with its attention statistics over the real rows, as the
 * dot-product kind's, and `note`.
 */
export const l2AttentionKind: LayerKindSpec<L2Prepared> = {
  kind: "l2Attention",
  params: { required: ["wq", "wv", "wo", "bo"], optional: ["bv"] },
  extraVariants: L2_VARIANTS,
  forward(x, ctx) {
    const p = ctx.params;
    const r = l2MultiHeadAttention(
      x,
      { wq: p.wq, wv: p.wv, wo: p.wo, bo: p.bo, bv: p.bv },
      setting(ctx.settings, "heads", "l2Attention") as number,
      ctx.allowed,
    );
    const extras: Record<string, tf.Tensor> = { q: r.q, k: r.k, v: r.v, p: r.p };
    return { out: r.out, extras };
  },
  reference64: (x, shape, params, settings) =>
    l2Attention64(x, shape[0], setting(settings, "heads", "l2Attention") as number, params).out,
  prepare(params, settings, name) {
    const heads = setting(settings, "heads", name) as number;
    const d = params.wq.shape[0];
    if (params.wq.shape.length !== 2 || params.wq.shape[1] !== d || d % heads !== 0)
      throw new RangeError(
        `${name}.wq: expected [d, d] with d divisible by ${heads}, got [${params.wq.shape.join(", ")}]`,
      );
    const dk = d / heads;
    const norm = (m: NamedArray, h: number) => weightSpectralNorm(columns(m, h, dk), d, dk);
    return {
      dk,
      wq: Array.from({ length: heads }, (_, h) => norm(params.wq, h)),
      wv: Array.from({ length: heads }, (_, h) => norm(params.wv, h)),
      wo: weightSpectralNorm(params.wo.data, d, d),
      local: Array.from({ length: heads }, (_, h) =>
        l2HeadWeights(columns(params.wq, h, dk), columns(params.wv, h, dk), d, dk),
      ),
    };
  },
  globalBounds: ({ dk, wq, wv, wo }, n) => [
    {
      name: "kim",
      value: attentionLayerBound(
        wq.map((nq, h) => ({ kim: kimHeadBound(n, dk, nq, wv[h]) }) as VariantValues),
        wo,
      ).kim,
    },
  ],
  rule(layer) {
    const x = input(layer);
    const [n, d] = x.shape;
    const p = extra(layer, "p");
    const { dk, wq, wv, wo, local } = layer.prepared;
    const heads = wq.length;
    const allowed = layer.mask.allowed;
    const masked = allowed?.some((a) => !a) ?? false;
    const variants = layer.options.variants;
    // Only dot-product variants asked: every value would be Infinity; refused like `kim` on
    // dot-product attention.
    refuseDotOnlyVariants(variants, layer.name);
    const localWanted = L2_LOCAL_VARIANTS.filter((v) => variants.includes(v));
    // The local variants at this input: Q = X W_Q and P in float64 from the traced input.
    const localValues: Partial<Record<string, number>>[] = [];
    if (localWanted.length > 0) {
      const p64 = l2Attention64(x.data, n, heads, layer.params, allowed).p;
      const w = layer.params.wq.data;
      for (let h = 0; h < heads; h++) {
        const q = new Float64Array(n * dk);
        for (let i = 0; i < n; i++)
          for (let a = 0; a < dk; a++) {
            let s = 0;
            for (let t = 0; t < d; t++) s += x.data[i * d + t] * w[t * d + h * dk + a];
            q[i * dk + a] = s;
          }
        const r = l2HeadBounds(
          { n, q, p: p64.subarray(h * n * n, (h + 1) * n * n), allowed },
          local[h],
          localWanted,
        );
        localValues.push(r.values);
      }
    }
    const headValues = wq.map((nq, h) =>
      perVariant((v) => {
        if (v === "kim") return masked ? Infinity : kimHeadBound(n, dk, nq, wv[h]);
        return localValues[h]?.[v] ?? Infinity;
      }, variants),
    );
    const detail: AttentionDetail & { note: string } = {
      note: masked ? KIM_MASKED : L2_NO_BOUND,
      heads: Array.from({ length: heads }, (_, h) => ({
        values: headValues[h],
        stats: attentionStats(
          headRowStats(p.data.subarray(h * n * n, (h + 1) * n * n), n, layer.mask.allowed),
          layer.mask.real,
        ),
      })),
    };
    // Infinity stays Infinity (also when ||W_O|| = 0, where the product would be NaN).
    const composed = attentionLayerBound(headValues, wo);
    const value = perVariant(
      (v) => (headValues.some((hv) => hv[v] === Infinity) ? Infinity : composed[v]),
      variants,
    );
    return { value, detail };
  },
};
