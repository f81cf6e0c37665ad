import type { NamedArray } from "../../nn/params.ts";
import { headWeightNorms, type HeadNorms, type HeadWeights } from "./attentionHead.ts";
import { cachedWeightQuantity, isNorm, weightSpectralNorm } from "../weightCache.ts";

/** Weights by name, as `model.getWeights()` returns them. */
export type Weights = Map<string, NamedArray>;

/** The shape facts the weight norms need (a subset of a model config). */
export interface NormShape {
  dModel: number;
  heads: number;
  blocks: number;
}

/** Input-independent quantities of one block. */
export interface BlockWeightNorms {
  heads: HeadNorms[];
  /** ||W_O||_2. */
  wo: number;
  /** LayerNorm gammas [d] (float64 copies). */
  ln1Gamma: Float64Array;
  ln2Gamma: Float64Array;
  /** MLP weights W_1 [d, hidden], W_2 [hidden, d] (float64 copies), their spectral norms. */
  hidden: number;
  w1: Float64Array;
  w2: Float64Array;
  w1Norm: number;
  w2Norm: number;
}

/** Input-independent quantities of a whole model ({@link modelWeightNorms}). */
export interface ModelWeightNorms {
  dModel: number;
  heads: number;
  blocks: BlockWeightNorms[];
  /** ||patch.w||_2 when the weights have a patch embedding. */
  patch?: number;
  /** ||head.w||_2 and the number of classes. */
  head: number;
  classes: number;
  /** Final LayerNorm gamma [d]. */
  normGamma: Float64Array;
}

function get(weights: Weights, name: string): NamedArray {
  const v = weights.get(name);
  if (v === undefined) throw new Error(`lipschitz rules: missing weight "${name}"`);
  return v;
}

/**
 * One head's weights from a model's weights: columns h*d_k .. (h+1)*d_k - 1 of
 * blocks.i.attn.{wq,wk,wv} [d, d] and the same entries of the optional biases.
 *
 * @throws Error naming a missing weight; RangeError on a wrong shape.
 * @example headWeights(model.getWeights(), 0, 1, 2).dk // d / 2
 */
export function headWeights(
  weights: Weights,
  block: number,
  head: number,
  heads: number,
): HeadWeights {
  const pre = `blocks.${block}.attn`;
  return headWeightsFrom(
    {
      wq: get(weights, `${pre}.wq`),
      wk: get(weights, `${pre}.wk`),
      wv: get(weights, `${pre}.wv`),
      bq: weights.get(`${pre}.bq`),
      bk: weights.get(`${pre}.bk`),
      bv: weights.get(`${pre}.bv`),
    },
    head,
    heads,
    `${pre}.wq`,
  );
}

/**
 * One head's weights from an attention layer's W_Q, W_K, W_V [d, d] and optional biases [d]
 * (docs/math.md section 2): columns h*d_k .. (h+1)*d_k - 1, as float64.
 *
 * @param label names W_Q in errors.
 * @throws RangeError when W_Q is not [d, d] with d divisible by heads.
 * @example headWeightsFrom({ wq, wk, wv }, 0, 1, "wq").d // wq.shape[0]
 */
export function headWeightsFrom(
  p: {
    wq: NamedArray;
    wk: NamedArray;
    wv: NamedArray;
    bq?: NamedArray;
    bk?: NamedArray;
    bv?: NamedArray;
  },
  head: number,
  heads: number,
  label = "wq",
): HeadWeights {
  const d = p.wq.shape[0];
  if (p.wq.shape.length !== 2 || p.wq.shape[1] !== d || d % heads !== 0)
    throw new RangeError(
      `${label}: expected [d, d] with d divisible by ${heads}, got [${p.wq.shape.join(", ")}]`,
    );
  const dk = d / heads;
  const cols = (m: NamedArray) => {
    const out = new Float64Array(d * dk);
    for (let i = 0; i < d; i++)
      for (let c = 0; c < dk; c++) out[i * dk + c] = m.data[i * d + head * dk + c];
    return out;
  };
  const bias = (b: NamedArray | undefined) =>
    b === undefined ? undefined : Float64Array.from(b.data.subarray(head * dk, (head + 1) * dk));
  return {
    d,
    dk,
    wq: cols(p.wq),
    wk: cols(p.wk),
    wv: cols(p.wv),
    bq: bias(p.bq),
    bk: bias(p.bk),
    bv: bias(p.bv),
  };
}

/**
 * {@link headWeightNorms} through src/lipschitz/weightCache.ts: computed once per head weight
 * content when a store is installed (the Node side: on disk).
 *
 * @throws RangeError as headWeightNorms.
 * @example cachedHeadWeightNorms(headWeights(model.getWeights(), 0, 0, 4)).a
 */
export function cachedHeadWeightNorms(w: HeadWeights): HeadNorms {
  const parts: Float64Array[] = [w.wq, w.wk, w.wv];
  const present = (["bq", "bk", "bv"] as const).filter((b) => w[b] !== undefined);
  for (const b of present) parts.push(w[b] as Float64Array);
  return cachedWeightQuantity(
    `headWeightNorms d=${w.d} dk=${w.dk} ${present.join(",")}`,
    parts,
    () => headWeightNorms(w),
    (v): v is HeadNorms => isHeadNorms(v, w.d, w.dk),
  );
}

/** Whether a stored value has the fields, types and sizes headWeightNorms gives for d and d_k. */
function isHeadNorms(v: unknown, d: number, dk: number): boolean {
  if (typeof v !== "object" || v === null) return false;
  const n = v as Record<string, unknown>;
  const square = (m: unknown) => m instanceof Float64Array && m.length === dk * dk;
  return (
    n.d === d &&
    n.dk === dk &&
    square(n.gq) &&
    square(n.gk) &&
    square(n.fq) &&
    square(n.fk) &&
    isNorm(n.wv) &&
    isNorm(n.wk) &&
    isNorm(n.a) &&
    typeof n.augmented === "boolean" &&
    isNorm(n.aAug)
  );
}

const cache = new WeakMap<Weights, Map<string, ModelWeightNorms>>();

/**
 * Spectral norms and factors of every weight matrix the rules use (docs/math.md sections 2-3):
 * per head {@link HeadNorms}, ||W_O||, ||W_1||, ||W_2||, ||patch.w||, ||head.w||. Computed
 * once per weights map and shape, then cached (keyed by the Map object: pass the same map to
 * reuse it; `model.getWeights()` returns a fresh map on each call). Do not mutate a cached map.
 *
 * @throws Error naming a missing weight; RangeError on wrong shapes.
 */
export function modelWeightNorms(weights: Weights, shape: NormShape): ModelWeightNorms {
  const key = `${shape.dModel}/${shape.heads}/${shape.blocks}`;
  let perMap = cache.get(weights);
  const hit = perMap?.get(key);
  if (hit) return hit;
  const d = shape.dModel;
  const blocks: BlockWeightNorms[] = [];
  for (let i = 0; i < shape.blocks; i++) {
    const pre = `blocks.${i}`;
    const heads: HeadNorms[] = [];
    for (let h = 0; h < shape.heads; h++)
      heads.push(cachedHeadWeightNorms(headWeights(weights, i, h, shape.heads)));
    const wo = get(weights, `${pre}.attn.wo`);
    const w1 = get(weights, `${pre}.mlp.w1`);
    const w2 = get(weights, `${pre}.mlp.w2`);
    const hidden = w1.shape[1];
    if (w1.shape[0] !== d || w2.shape[0] !== hidden || w2.shape[1] !== d)
      throw new RangeError(`${pre}.mlp: expected w1 [${d}, hidden] and w2 [hidden, ${d}]`);
    blocks.push({
      heads,
      wo: weightSpectralNorm(wo.data, d, d),
      ln1Gamma: Float64Array.from(get(weights, `${pre}.ln1.gamma`).data),
      ln2Gamma: Float64Array.from(get(weights, `${pre}.ln2.gamma`).data),
      hidden,
      w1: Float64Array.from(w1.data),
      w2: Float64Array.from(w2.data),
      w1Norm: weightSpectralNorm(w1.data, d, hidden),
      w2Norm: weightSpectralNorm(w2.data, hidden, d),
    });
  }
  const head = get(weights, "head.w");
  const patch = weights.get("patch.w");
  const out: ModelWeightNorms = {
    dModel: d,
    heads: shape.heads,
    blocks,
    patch:
      patch === undefined
        ? undefined
        : weightSpectralNorm(patch.data, patch.shape[0], patch.shape[1]),
    head: weightSpectralNorm(head.data, d, head.shape[1]),
    classes: head.shape[1],
    normGamma: Float64Array.from(get(weights, "norm.gamma").data),
  };
  if (!perMap) {
    perMap = new Map();
    cache.set(weights, perMap);
  }
  perMap.set(key, out);
  return out;
}
