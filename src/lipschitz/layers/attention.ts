import { multiHeadAttention } from "../../nn/attention.ts";
import type { tf } from "../../backend.ts";
import { attentionHeadBounds } from "../rules/attentionHead.ts";
import { fusedWithRowWeights } from "../rules/fusedPaths.ts";
import { inputNorms } from "../rules/headQuantities.ts";
import type { FusedRows, HeadNorms, PreRowwise, VariantValues } from "../rules/headTypes.ts";
import { dotNeeds, FUSED, refuseL2Variants } from "../variants/index.ts";
import { attentionLayerBound } from "../rules/attentionLayer.ts";
import { headWeightsFrom } from "../rules/weightNorms.ts";
import { matMulInto, spectralNorm } from "../linalg.ts";
import { cachedHeadWeightNorms } from "../rules/weightNorms.ts";
import { weightSpectralNorm } from "../weightCache.ts";
import { preRowwise } from "../rules/preRowwise.ts";
import { extra, input, setting } from "./view.ts";
import type { LayerKindSpec, LayerView, RowwiseBefore } from "./types.ts";

/** Attention statistics of one head on one example, over its real, live query rows. */
export interface AttentionStats {
  /** Number of rows the statistics are over (real query rows with at least one allowed key). */
  rows: number;
  /** Mean and max of exact sigma(P_i). */
  meanSigma: number;
  maxSigma: number;
  /** Mean of p_(1) and of the entropy of P_i (nats). */
  meanTop: number;
  meanEntropy: number;
}

/** One head on one example. */
export interface HeadReport {
  /** Bound per variant on the head's local Lipschitz constant. */
  values: VariantValues;
  stats: AttentionStats;
}

/** The `detail` of an attention layer's bound: its heads. */
export interface AttentionDetail {
  heads: HeadReport[];
}

/** Weight-only quantities of an attention layer: per head {@link HeadNorms}, and ||W_O||_2. */
export interface AttentionPrepared {
  heads: HeadNorms[];
  wo: number;
}

/**
 * Multi-head self-attention (src/nn/attention.ts). Roles wq, wk, wv, wo [d, d], bo [d], optional
 * bq, bk, bv [d]; setting `heads`; extras q, k, v [b, H, n, d_k] and p [b, H, n, n].
 * Rule (docs/math.md sections 2-3): every head variant of attentionHeadBounds at the layer's
 * input, then ||W_O|| (sum_h L_h^2)^(1/2) per variant; `detail` holds each head's values and
 * attention statistics over the real rows.
 */
export const attentionKind: LayerKindSpec<AttentionPrepared> = {
  kind: "attention",
  params: { required: ["wq", "wk", "wv", "wo", "bo"], optional: ["bq", "bk", "bv"] },
  forward(x, ctx) {
    const p = ctx.params;
    const r = multiHeadAttention(
      x,
      { wq: p.wq, wk: p.wk, wv: p.wv, wo: p.wo, bo: p.bo, bq: p.bq, bk: p.bk, bv: p.bv },
      setting(ctx.settings, "heads", "attention") as number,
      ctx.allowed,
    );
    const extras: Record<string, tf.Tensor> = { q: r.q, k: r.k, v: r.v, p: r.p };
    return { out: r.out, extras };
  },
  prepare(params, settings, name) {
    const heads = setting(settings, "heads", name) as number;
    const d = params.wq.shape[0];
    const norms: HeadNorms[] = [];
    const qkv = params as Parameters<typeof headWeightsFrom>[0];
    for (let h = 0; h < heads; h++)
      norms.push(cachedHeadWeightNorms(headWeightsFrom(qkv, h, heads, `${name}.wq`)));
    return { heads: norms, wo: weightSpectralNorm(params.wo.data, d, d) };
  },
  rule: (layer) => attentionRule(layer),
  // `fused` after a row-wise map (a pre-LN block's LayerNorm): each head's paths see the map's
  // row Jacobians L_j through L_j W_Q, L_j W_K, L_j W_V (docs/math.md section 2, `fused`).
  ruleAfterRowwise(layer, before) {
    if (!layer.options.variants.includes(FUSED)) return {};
    const rule = attentionRule(layer, preRowwiseOf(layer, before), true);
    const heads = rule.detail;
    // Kept for ruleBetweenRowwise at the same example (the block's joint bound), which then only
    // reweights the rows.
    fusedRowsCache.set(layer, rule.fusedRows);
    return {
      [FUSED]: attentionLayerBound(
        heads.heads.map((hr) => hr.values),
        layer.prepared.wo,
      )[FUSED],
    };
  },
  // `fused` between row-wise maps F (before; null: none) and G (after; the MLP half of a pre-LN
  // block): F enters the token weights as above, and G's rows the output-row weights
  // rho_i = ||W_O G_i||_2, in place of ||W_O|| (docs/math.md section 3, "A row-wise run fused
  // into the layer before it").
  ruleBetweenRowwise(layer, before, after) {
    if (!layer.options.variants.includes(FUSED)) return {};
    const [n, d] = input(layer).shape;
    const H = layer.prepared.heads.length;
    // The pieces ruleAfterRowwise kept at this example; else (no map before: post-LN) computed here.
    const cached = before === null ? undefined : fusedRowsCache.get(layer);
    const kept =
      cached !== undefined && cached.length === H && cached.every((r) => r.n === n)
        ? cached
        : attentionRule(layer, before === null ? undefined : preRowwiseOf(layer, before), true)
            .fusedRows;
    const post = outputRowWeights(layer.params.wo.data, d, n, after);
    return {
      [FUSED]: attentionLayerBound(
        kept.map((r) => ({ [FUSED]: fusedWithRowWeights(r, post) }) as VariantValues),
        1,
      )[FUSED],
    };
  },
};

/** One {@link PreRowwise} per head for the row-wise map before the layer (its row Jacobians). */
function preRowwiseOf(layer: LayerView<AttentionPrepared>, before: RowwiseBefore): PreRowwise[] {
  // The weights as stored (float32 entries read exactly into the float64 products).
  const { wq, wk, wv } = layer.params;
  const n = input(layer).shape[0];
  const w = { wq: wq.data, wk: wk.data, wv: wv.data };
  return preRowwise(before.rowJacobian, n, w, layer.prepared.heads.length, before.bound.fused);
}

/**
 * `fused`'s per-row pieces of each head after the row-wise map before it, by attention entry at
 * one example (a LayerView lives for one composition): ruleAfterRowwise keeps them, and
 * ruleBetweenRowwise reweights them with the MLP half's output-row weights.
 */
const fusedRowsCache = new WeakMap<LayerView<AttentionPrepared>, FusedRows[]>();

/**
 * rho_i = ||W_O G_i||_2 per output row i, G_i the row-wise map's row Jacobian after the layer
 * (row-vector convention: d out_i = d ctx_i W_O G_i).
 */
function outputRowWeights(
  wo: Float32Array | Float64Array,
  d: number,
  n: number,
  after: RowwiseBefore,
): Float64Array {
  const rho = new Float64Array(n);
  const prod = new Float64Array(d * d);
  for (let i = 0; i < n; i++) {
    prod.fill(0);
    matMulInto(wo, after.rowJacobian(i).matrix(), prod, d, d, d);
    rho[i] = spectralNorm(prod, d, d);
  }
  return rho;
}

/**
 * The attention rule at one example: every asked-for head variant, or with `fusedOnly` only
 * `fused` (after a row-wise map when `pres`, one {@link PreRowwise} per head, is given), keeping
 * its per-row pieces ({@link FusedRows}) for reweighting.
 */
function attentionRule(
  layer: LayerView<AttentionPrepared>,
  pres?: PreRowwise[],
  fusedOnly = false,
): { value: VariantValues; detail: AttentionDetail; fusedRows: FusedRows[] } {
  // Dot-product attention is not globally Lipschitz (Kim et al. 2021, Theorem 3.1): no `kim`;
  // and the L2 local variants are derived for L2 scores.
  refuseL2Variants(layer.options.variants, layer.name);
  const x = input(layer);
  const [n, d] = x.shape;
  const q = extra(layer, "q");
  const k = extra(layer, "k");
  const v = extra(layer, "v");
  const p = extra(layer, "p");
  const H = layer.prepared.heads.length;
  if (q.shape[0] !== H)
    throw new RangeError(`${layer.name}: q has ${q.shape[0]} heads, the weights ${H}`);
  const dk = q.shape[2];
  // ||X|| and ||[X, 1]|| are read by the variants that need `inputNorms` only (`paper`), each by
  // the heads without / with a query bias.
  const paper = dotNeeds(layer.options.variants).has("inputNorms");
  const heads0 = layer.prepared.heads;
  const xNorms = inputNorms(x.data, n, d, {
    plain: paper && heads0.some((hn) => !hn.augmented),
    augmented: paper && heads0.some((hn) => hn.augmented),
  });
  const slice = (a: Float32Array | Float64Array, h: number, size: number) =>
    a.subarray(h * size, (h + 1) * size);
  const kept: FusedRows[] = []; // with fusedOnly: `fused`'s per-row pieces of each head
  const heads: HeadReport[] = layer.prepared.heads.map((hn, h) => {
    const r = attentionHeadBounds(
      {
        n,
        xNorms,
        q: slice(q.data, h, n * dk),
        k: slice(k.data, h, n * dk),
        v: slice(v.data, h, n * dk),
        p: slice(p.data, h, n * n),
        allowed: layer.mask.allowed,
      },
      hn,
      fusedOnly
        ? { variants: [FUSED], pre: pres?.[h], keepRows: true }
        : { variants: layer.options.variants },
    );
    if (r.fusedRows !== undefined) kept.push(r.fusedRows);
    return { values: r.values, stats: attentionStats(r.rows, layer.mask.real) };
  });
  const detail: AttentionDetail = { heads };
  return {
    value: attentionLayerBound(
      heads.map((hr) => hr.values),
      layer.prepared.wo,
    ),
    detail,
    fusedRows: kept,
  };
}

/**
 * Mean/max sigma, mean p_(1) and mean entropy over the rows that are real (real[i] nonzero)
 * and live (at least one allowed key). All zero when there is no such row.
 *
 * @param rows per-row values of one head [n] (headRowStats, docs/math.md section 1).
 * @param real optional [n] mask of real query rows (default: all real).
 * @example attentionStats(headRowStats(p, n), mask).meanSigma
 */
export function attentionStats(
  rows: { live: Uint8Array; exact: Float64Array; top: Float64Array; entropy: Float64Array },
  real?: ArrayLike<number | boolean>,
): AttentionStats {
  let count = 0;
  let sum = 0;
  let max = 0;
  let top = 0;
  let ent = 0;
  for (let i = 0; i < rows.live.length; i++) {
    if (!rows.live[i] || (real !== undefined && !real[i])) continue;
    count++;
    sum += rows.exact[i];
    max = Math.max(max, rows.exact[i]);
    top += rows.top[i];
    ent += rows.entropy[i];
  }
  const c = Math.max(count, 1);
  return { rows: count, meanSigma: sum / c, maxSigma: max, meanTop: top / c, meanEntropy: ent / c };
}
