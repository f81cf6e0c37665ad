import type { tf } from "../../backend.ts";
import { l2MultiHeadAttention } from "../../nn/l2Attention.ts";
import type { NamedArray } from "../../nn/params.ts";
import { headRowStats } from "../rules/headQuantities.ts";
import type { VariantValues } from "../rules/headTypes.ts";
import { attentionLayerBound } from "../rules/attentionLayer.ts";
import { InputError } from "../../util/errors.ts";
import {
  l2HeadQuantities,
  l2HeadWeights,
  l2Probabilities64,
  type L2HeadWeights,
} from "../rules/l2Head.ts";
import {
  boundVariants,
  findBoundVariant,
  variantNames,
  type L2HeadQuantities,
  type L2Need,
} from "../variants/index.ts";
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
  if (!variants.some((v) => (findBoundVariant(v)?.kind ?? "dot") !== "dot"))
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
 * Rule, per head and then ||W_O|| (sum_h L_h^2)^(1/2) per variant, each variant by its record
 * (src/lipschitz/variants/):
 * - the local ones (kind "l2": `l2-dist`, `l2-cov`; rules/l2Head.ts; docs/math.md section 2,
 *   "Local bounds of L2 attention"): bounds on ||Df(X)|| at this input X only, from
 *   Q = X W^{Q,h} and P recomputed in float64 from the traced input (rules/l2Head.ts
 *   l2Probabilities64), with masks;
 * - the global ones (kind "l2-global": `kim`, Kim et al.'s Theorem 3.2, rules/kim.ts), per head
 *   from N, d_k, ||W^{Q,h}|| and ||W^{V,h}||: a bound on the layer's Lipschitz constant over ALL
 *   inputs, hence on ||Df(X)|| at this one; Infinity with the note {@link KIM_MASKED} when keys
 *   are masked;
 * - every dot-product variant gives the vacuous bound Infinity ({@link L2_NO_BOUND}).
 * `detail` holds each head's values with its attention statistics over the real rows, as the
 * dot-product kind's, and `note`.
 */
export const l2AttentionKind: LayerKindSpec<L2Prepared> = {
  kind: "l2Attention",
  params: { required: ["wq", "wv", "wo", "bo"], optional: ["bv"] },
  // Every registered variant of L2 attention (built-ins: l2-dist, l2-cov, kim).
  get extraVariants() {
    return variantNames("l2");
  },
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
  // The registered global variants (kim): their layer bound at sequence length n.
  globalBounds: ({ dk, wq, wv, wo }, n) =>
    boundVariants("l2").flatMap((spec) =>
      spec.kind !== "l2-global"
        ? []
        : [
            {
              name: spec.name,
              value: attentionLayerBound(
                wq.map(
                  (nq, h) =>
                    ({ [spec.name]: spec.compute({ n, dk, wq: nq, wv: wv[h] }) }) as VariantValues,
                ),
                wo,
              )[spec.name],
            },
          ],
    ),
  rule(layer) {
    const x = input(layer);
    const n = x.shape[0];
    const p = extra(layer, "p");
    const { wq, wv, wo } = layer.prepared;
    const heads = wq.length;
    const masked = layer.mask.allowed?.some((a) => !a) ?? false;
    const variants = layer.options.variants;
    // Only dot-product variants asked: every value would be Infinity; refused like `kim` on
    // dot-product attention.
    refuseDotOnlyVariants(variants, layer.name);
    const local = localQuantities(layer, variants);
    const headValues = wq.map((nq, h) =>
      perVariant((v) => {
        const spec = findBoundVariant(v);
        if (spec?.kind === "l2-global")
          return masked ? Infinity : spec.compute({ n, dk: layer.prepared.dk, wq: nq, wv: wv[h] });
        if (spec?.kind === "l2" && local[h] !== undefined) return spec.compute(local[h]);
        return Infinity;
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

/**
 * The local quantities of each head ({@link L2HeadQuantities}) at the layer's input when a local
 * variant of L2 attention is asked for (none otherwise): Q = X W_Q and P recomputed in float64
 * from the traced input (l2Probabilities64), with the masks, and the costly parts only when an
 * asked-for variant needs them.
 */
function localQuantities(
  layer: Parameters<(typeof l2AttentionKind)["rule"]>[0],
  variants: readonly string[],
): L2HeadQuantities[] {
  const locals = variants.flatMap((v) => {
    const spec = findBoundVariant(v);
    return spec?.kind === "l2" ? [spec] : [];
  });
  if (locals.length === 0) return [];
  const needs = new Set<L2Need>(locals.flatMap((s) => s.needs));
  const x = input(layer);
  const [n, d] = x.shape;
  const { dk, local } = layer.prepared;
  const allowed = layer.mask.allowed;
  const w = layer.params.wq.data;
  return local.map((weights, h) => {
    const q = new Float64Array(n * dk);
    for (let i = 0; i < n; i++)
      for (let a = 0; a < dk; a++) {
        let s = 0;
        for (let t = 0; t < d; t++) s += x.data[i * d + t] * w[t * d + h * dk + a];
        q[i * dk + a] = s;
      }
    const p64 = l2Probabilities64(q, n, dk, allowed);
    return l2HeadQuantities({ n, q, p: p64, allowed }, weights, needs).quantities;
  });
}
