import type { NamedArray } from "../nn/params.ts";
import type { TracedLayer } from "../nn/trace.ts";
import { gelu, geluDerivative, geluErf, geluErfDerivative } from "../nn/gelu.ts";
import type { Pooling } from "../nn/pooling.ts";
import { matMulInto } from "../lipschitz/linalg.ts";
import { weightSpectralNorm } from "../lipschitz/weightCache.ts";
import { cachedHeadWeightNorms, headWeightsFrom } from "../lipschitz/rules/weightNorms.ts";
import { dotHeadQuantities, inputNorms } from "../lipschitz/rules/headQuantities.ts";
import { pooledRows, poolBound } from "../lipschitz/rules/output.ts";
import type { HeadNorms } from "../lipschitz/rules/headTypes.ts";
import { InputError } from "../util/errors.ts";
import {
  activationDerivativeBound,
  layerNormBallFactor,
  probabilityBox,
  scoreHalfWidth,
  sigmaBoxMax,
  tanhDerivativeBound,
  type SigmaRule,
} from "./ballRules.ts";

/**
 * The layers of a traced network over a ball (docs/math.md section 7): for each traced layer
 * kind, a float64 forward pass from the layer's centre input (the reference activations the
 * balls are centred on) and a bound S(r) of ||D layer(y)||_2 over every input y of the ball
 * B(centre, r) (Frobenius norm over the layer's whole input). A composite chains its children:
 * the input of child k + 1 lies in the ball of radius S_k r_k around child k's centre output
 * (mean value inequality), and the chain's factor is the product of the S_k (chain rule).
 * Everything radius-independent is computed once here; S(r) costs O(H n^2) per attention layer
 * and less for the others, so a bisection on r repeats only that.
 */

/** One traced layer over the ball: its float64 output at the centre and its factor S(r). */
export interface BallLayer {
  kind: string;
  name: string;
  /** The output at the centre input, row-major [rows, width]. */
  out: Float64Array;
  rows: number;
  width: number;
  /**
   * A bound of sup ||D layer(y)||_2 over y in B(centre input, r), Frobenius norms in and out;
   * non-decreasing in r. `rule`: the softmax Jacobian's norm from the probability box ("dist")
   * or the worst case 1/2 ("half").
   */
  factor(r: number, rule: SigmaRule): number;
  /** A composite's sub-layers, in forward order. */
  children: readonly BallLayer[];
}

/** What every layer of one input shares: the weights, the masks, a cache of weight quantities. */
export interface BallContext {
  weights: ReadonlyMap<string, NamedArray>;
  /** Real rows [n] (1 = real token); undefined: all real. */
  real?: Uint8Array;
  /** Allowed keys [n, n] (row = query, 1 = may attend); undefined: all allowed. */
  allowed?: Uint8Array;
  /** Weight-only quantities by key, reused across inputs (one Map per model). */
  cache: Map<string, unknown>;
}

/** One kind's builder: the layer at its centre input x [rows, width]. */
type BallKind = (
  layer: TracedLayer,
  x: Float64Array,
  rows: number,
  width: number,
  ctx: BallContext,
) => BallLayer;

function param(
  layer: TracedLayer,
  role: string,
  ctx: BallContext,
  optional = false,
): NamedArray | undefined {
  const name = layer.params[role];
  const w = name === undefined ? undefined : ctx.weights.get(name);
  if (w === undefined && !optional)
    throw new Error(
      `certify: ${layer.name}: missing weight for role "${role}"${name === undefined ? "" : ` ("${name}")`}`,
    );
  return w;
}

function need(layer: TracedLayer, role: string, ctx: BallContext): NamedArray {
  return param(layer, role, ctx) as NamedArray;
}

function settingOf(layer: TracedLayer, key: string): number | string | boolean {
  const v = layer.settings?.[key];
  if (v === undefined) throw new RangeError(`certify: ${layer.name}: setting "${key}" is missing`);
  return v;
}

function cached<T>(ctx: BallContext, key: string, compute: () => T): T {
  if (ctx.cache.has(key)) return ctx.cache.get(key) as T;
  const v = compute();
  ctx.cache.set(key, v);
  return v;
}

/** y = x W + b for x [rows, in], W [in, out]. */
function affine(
  x: Float64Array,
  rows: number,
  w: NamedArray,
  b: NamedArray | undefined,
): Float64Array {
  const [inDim, outDim] = w.shape;
  const y = new Float64Array(rows * outDim);
  matMulInto(x, w.data, y, rows, inDim, outDim);
  if (b !== undefined)
    for (let r = 0; r < rows; r++) for (let o = 0; o < outDim; o++) y[r * outDim + o] += b.data[o];
  return y;
}

/** Euclidean norms of the columns of W [rows, cols]. */
function columnNorms(w: NamedArray): Float64Array {
  const [rows, cols] = w.shape;
  const out = new Float64Array(cols);
  for (let i = 0; i < rows; i++) for (let j = 0; j < cols; j++) out[j] += w.data[i * cols + j] ** 2;
  return out.map(Math.sqrt);
}

function gammaMax(gamma: NamedArray): number {
  let g = 0;
  for (const v of gamma.data) g = Math.max(g, Math.abs(v));
  return g;
}

/** Row-wise LayerNorm of x [rows, d]; returns the output and each row's standard deviation. */
function layerNorm64(
  x: Float64Array,
  rows: number,
  d: number,
  gamma: NamedArray,
  beta: NamedArray,
  eps: number,
) {
  const out = new Float64Array(rows * d);
  const std = new Float64Array(rows);
  for (let r = 0; r < rows; r++) {
    let mean = 0;
    for (let k = 0; k < d; k++) mean += x[r * d + k];
    mean /= d;
    let v = 0;
    for (let k = 0; k < d; k++) v += (x[r * d + k] - mean) ** 2;
    v /= d;
    std[r] = Math.sqrt(v);
    const inv = 1 / Math.sqrt(v + eps);
    for (let k = 0; k < d; k++)
      out[r * d + k] = gamma.data[k] * (x[r * d + k] - mean) * inv + beta.data[k];
  }
  return { out, std };
}

/** The LayerNorm factor over the ball for the given rows: the row of smallest spread decides. */
function layerNormFactor(
  std: Float64Array,
  rows: readonly number[],
  d: number,
  eps: number,
  gMax: number,
) {
  let minStd = Infinity;
  for (const r of rows) minStd = Math.min(minStd, std[r]);
  return (rho: number) => (rows.length === 0 ? 0 : layerNormBallFactor(minStd, rho, d, eps, gMax));
}

const layerNormKind: BallKind = (layer, x, rows, d, ctx) => {
  const gamma = need(layer, "gamma", ctx);
  const eps = settingOf(layer, "eps") as number;
  const { out, std } = layerNorm64(x, rows, d, gamma, need(layer, "beta", ctx), eps);
  const factor = layerNormFactor(std, [...std.keys()], d, eps, gammaMax(gamma));
  return {
    kind: layer.kind,
    name: layer.name,
    out,
    rows,
    width: d,
    factor: (r) => factor(r),
    children: [],
  };
};

/** The rows pooling reads, and the pooled vector [width] of x [rows, width]. */
function pool(x: Float64Array, rows: number, d: number, pooling: Pooling, real?: Uint8Array) {
  const read = pooledRows(rows, pooling, real);
  const out = new Float64Array(d);
  for (const r of read) for (let k = 0; k < d; k++) out[k] += x[r * d + k];
  if (pooling === "mean" && read.length > 0) for (let k = 0; k < d; k++) out[k] /= read.length;
  return { read, out };
}

const finalNormKind: BallKind = (layer, x, rows, d, ctx) => {
  const gamma = need(layer, "gamma", ctx);
  const eps = settingOf(layer, "eps") as number;
  const pooling = settingOf(layer, "pooling") as Pooling;
  const { out: normed, std } = layerNorm64(x, rows, d, gamma, need(layer, "beta", ctx), eps);
  const { read, out } = pool(normed, rows, d, pooling, ctx.real);
  const ln = layerNormFactor(std, read, d, eps, gammaMax(gamma));
  // Mean pooling of m rows: max_i ||J_i|| / sqrt(m) (Cauchy-Schwarz over the rows, section 3).
  const scale = pooling === "mean" && read.length > 0 ? 1 / Math.sqrt(read.length) : 1;
  return {
    kind: layer.kind,
    name: layer.name,
    out,
    rows: 1,
    width: d,
    factor: (r) => ln(r) * scale,
    children: [],
  };
};

const poolKind: BallKind = (layer, x, rows, d, ctx) => {
  const pooling = settingOf(layer, "pooling") as Pooling;
  const { out } = pool(x, rows, d, pooling, ctx.real);
  const value = poolBound(rows, pooling, ctx.real);
  return {
    kind: layer.kind,
    name: layer.name,
    out,
    rows: 1,
    width: d,
    factor: () => value,
    children: [],
  };
};

const linearKind: BallKind = (layer, x, rows, _d, ctx) => {
  const w = need(layer, "w", ctx);
  const out = affine(x, rows, w, param(layer, "b", ctx, true));
  const norm = cached(ctx, `${layer.name}/w`, () =>
    weightSpectralNorm(w.data, w.shape[0], w.shape[1]),
  );
  return {
    kind: layer.kind,
    name: layer.name,
    out,
    rows,
    width: w.shape[1],
    factor: () => norm,
    children: [],
  };
};

const poolerKind: BallKind = (layer, x, rows, _d, ctx) => {
  const w = need(layer, "w", ctx);
  const z = affine(x, rows, w, need(layer, "b", ctx));
  const out = z.map(Math.tanh);
  const norm = cached(ctx, `${layer.name}/w`, () =>
    weightSpectralNorm(w.data, w.shape[0], w.shape[1]),
  );
  const c = cached(ctx, `${layer.name}/columns`, () => columnNorms(w));
  const width = w.shape[1];
  // ||W diag(s)|| <= ||W|| max_j s_j, s_j = tanh'(z_j) at its largest over z_j's interval
  // [z0_j - r c_j, z0_j + r c_j] (c_j = ||W[:, j]||: a pooled input within r moves z_j by at most r c_j).
  const factor = (r: number) => {
    let s = 0;
    for (let i = 0; i < z.length; i++) {
      const cj = c[i % width];
      s = Math.max(s, tanhDerivativeBound(z[i] - r * cj, z[i] + r * cj));
      if (s === 1) break;
    }
    return norm * s;
  };
  return {
    kind: layer.kind,
    name: layer.name,
    out,
    rows,
    width,
    factor: (r) => factor(r),
    children: [],
  };
};

const mlpKind: BallKind = (layer, x, rows, d, ctx) => {
  const w1 = need(layer, "w1", ctx);
  const w2 = need(layer, "w2", ctx);
  const activation = String(layer.settings?.activation ?? "gelu-tanh");
  if (activation !== "gelu-tanh" && activation !== "gelu-erf")
    throw new RangeError(
      `certify: ${layer.name}: activation "${activation}" is neither gelu-tanh nor gelu-erf`,
    );
  const hidden = w1.shape[1];
  const h = affine(x, rows, w1, need(layer, "b1", ctx));
  const act = h.map(activation === "gelu-erf" ? geluErf : gelu);
  const out = affine(act, rows, w2, need(layer, "b2", ctx));
  const n1 = cached(ctx, `${layer.name}/w1`, () => weightSpectralNorm(w1.data, d, hidden));
  const n2 = cached(ctx, `${layer.name}/w2`, () => weightSpectralNorm(w2.data, hidden, d));
  const cMax = cached(ctx, `${layer.name}/columnMax`, () => Math.max(0, ...columnNorms(w1)));
  // A row within r of its centre moves pre-activation j by at most r ||W_1[:, j]||.
  const slope = activation === "gelu-erf" ? geluErfDerivative : geluDerivative;
  let atCentre = 0;
  for (let i = 0; i < h.length; i++) atCentre = Math.max(atCentre, Math.abs(slope(h[i])));
  const derivative = (r: number) => activationDerivativeBound(activation, atCentre, r * cMax);
  return {
    kind: layer.kind,
    name: layer.name,
    out,
    rows,
    width: d,
    factor: (r) => n1 * derivative(r) * n2,
    children: [],
  };
};

/** One head's radius-independent quantities (docs/math.md section 7, "Attention over the ball"). */
interface HeadBall {
  /** Scores at the centre, q_i . k_j / sqrt(d_k) [n, n]; P at the centre [n, n] (0 at masked keys). */
  s0: Float64Array;
  p0: Float64Array;
  /** ||W_Q k_j^T|| and ||W_K q_i^T|| per token [n]. */
  a: Float64Array;
  b: Float64Array;
  /** Centre values: ||P||_2, ||W_Q K_c^T||_2, ||Q W_K^T||_2 (live rows), ||V_c||_2; any live row. */
  pNorm: number;
  wqKc: number;
  qWk: number;
  vc: number;
  anyLive: boolean;
  /** ||W_Q W_K^T||_2 and ||W_V||_2. */
  m: number;
  wv: number;
}

/** sqrt(u G u^T) for u [dk] and symmetric G [dk, dk] (>= 0). */
function quadNorm(u: Float64Array, off: number, g: Float64Array, dk: number): number {
  let s = 0;
  for (let a = 0; a < dk; a++) {
    let t = 0;
    for (let c = 0; c < dk; c++) t += g[a * dk + c] * u[off + c];
    s += u[off + a] * t;
  }
  return Math.sqrt(Math.max(s, 0));
}

const attentionKind: BallKind = (layer, x, n, d, ctx) => {
  const heads = settingOf(layer, "heads") as number;
  const wq = need(layer, "wq", ctx);
  const wk = need(layer, "wk", ctx);
  const wv = need(layer, "wv", ctx);
  const wo = need(layer, "wo", ctx);
  const bo = need(layer, "bo", ctx);
  const bq = param(layer, "bq", ctx, true);
  const bk = param(layer, "bk", ctx, true);
  const bv = param(layer, "bv", ctx, true);
  // The tfjs layer adds the Q, K, V biases only when all three are there (src/nn/attention.ts).
  const biases = bq !== undefined && bk !== undefined && bv !== undefined;
  if (d % heads !== 0)
    throw new RangeError(`certify: ${layer.name}: d = ${d} is not divisible by ${heads} heads`);
  const dk = d / heads;
  const Q = affine(x, n, wq, biases ? bq : undefined);
  const K = affine(x, n, wk, biases ? bk : undefined);
  const V = affine(x, n, wv, biases ? bv : undefined);
  const allowed = ctx.allowed;
  const context = new Float64Array(n * d);
  const norms: HeadNorms[] = cached(ctx, `${layer.name}/heads`, () =>
    Array.from({ length: heads }, (_, h) =>
      cachedHeadWeightNorms(
        headWeightsFrom(
          { wq, wk, wv, ...(biases ? { bq, bk, bv } : {}) },
          h,
          heads,
          `${layer.name}.wq`,
        ),
      ),
    ),
  );
  const woNorm = cached(ctx, `${layer.name}/wo`, () => weightSpectralNorm(wo.data, d, d));
  const xNorms = inputNorms(x, n, d, { plain: false, augmented: false });
  const scale = 1 / Math.sqrt(dk);
  const ballHeads: HeadBall[] = norms.map((hn, h) => {
    const q = new Float64Array(n * dk);
    const k = new Float64Array(n * dk);
    const v = new Float64Array(n * dk);
    for (let i = 0; i < n; i++)
      for (let c = 0; c < dk; c++) {
        q[i * dk + c] = Q[i * d + h * dk + c];
        k[i * dk + c] = K[i * d + h * dk + c];
        v[i * dk + c] = V[i * d + h * dk + c];
      }
    const s0 = new Float64Array(n * n);
    const p0 = new Float64Array(n * n);
    for (let i = 0; i < n; i++) {
      let max = -Infinity;
      for (let j = 0; j < n; j++) {
        if (allowed !== undefined && !allowed[i * n + j]) continue;
        let s = 0;
        for (let c = 0; c < dk; c++) s += q[i * dk + c] * k[j * dk + c];
        s0[i * n + j] = s * scale;
        max = Math.max(max, s0[i * n + j]);
      }
      if (max === -Infinity) continue; // no allowed key: P_i = 0, head output 0
      let z = 0;
      for (let j = 0; j < n; j++) {
        if (allowed !== undefined && !allowed[i * n + j]) continue;
        p0[i * n + j] = Math.exp(s0[i * n + j] - max);
        z += p0[i * n + j];
      }
      for (let j = 0; j < n; j++) p0[i * n + j] /= z;
      for (let c = 0; c < dk; c++) {
        let s = 0;
        for (let j = 0; j < n; j++) s += p0[i * n + j] * v[j * dk + c];
        context[i * d + h * dk + c] = s;
      }
    }
    const { quantities } = dotHeadQuantities({ n, xNorms, q, k, v, p: p0, allowed }, hn, new Set());
    const a = new Float64Array(n);
    const b = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      a[i] = quadNorm(k, i * dk, hn.gq, dk); // ||W_Q k_i^T||^2 = k_i G_Q k_i^T
      b[i] = quadNorm(q, i * dk, hn.gk, dk); // ||W_K q_i^T||^2 = q_i G_K q_i^T
    }
    return {
      s0,
      p0,
      a,
      b,
      pNorm: quantities.p,
      wqKc: quantities.wqKc,
      qWk: quantities.qWk,
      vc: quantities.vc,
      anyLive: quantities.anyLive,
      m: hn.a * Math.sqrt(dk),
      wv: hn.wv,
    };
  });
  const out = affine(context, n, wo, bo);
  // Each row's allowed keys, once.
  const keys: Int32Array[] = Array.from({ length: n }, (_, i) => {
    const list: number[] = [];
    for (let j = 0; j < n; j++) if (allowed === undefined || allowed[i * n + j]) list.push(j);
    return Int32Array.from(list);
  });
  const sLo = new Float64Array(n);
  const sHi = new Float64Array(n);
  const pLo = new Float64Array(n);
  const pHi = new Float64Array(n);
  const work = new Float64Array(2 * n + 2);
  const colSum = new Float64Array(n);
  const headFactor = (hb: HeadBall, r: number, rule: SigmaRule): number => {
    if (!hb.anyLive) return 0;
    colSum.fill(0);
    let sMax = 0;
    let rowMax = 0;
    let dev2 = 0;
    for (let i = 0; i < n; i++) {
      const row = keys[i];
      const m = row.length;
      if (m === 0) continue;
      for (let t = 0; t < m; t++) {
        const j = row[t];
        const w = scoreHalfWidth(j === i ? hb.a[i] : hb.a[j], hb.b[i], hb.m, r, j === i, dk);
        const s = hb.s0[i * n + j];
        sLo[t] = s - w;
        sHi[t] = s + w;
      }
      probabilityBox(sLo, sHi, pLo, pHi, m, work);
      let rowSum = 0;
      for (let t = 0; t < m; t++) {
        const j = row[t];
        const p = hb.p0[i * n + j];
        // The centre's P is inside the box up to rounding: keep it so.
        const hi = Math.max(pHi[t], p);
        const lo = Math.min(pLo[t], p);
        pHi[t] = hi;
        pLo[t] = lo;
        colSum[j] += hi;
        rowSum += hi;
        const dev = Math.max(hi - p, p - lo);
        dev2 += dev * dev;
      }
      rowMax = Math.max(rowMax, Math.min(rowSum, 1));
      sMax = Math.max(sMax, rule === "half" ? (m > 1 ? 0.5 : 0) : sigmaBoxMax(pLo, pHi, m));
    }
    let colMax = 0;
    for (let j = 0; j < n; j++) colMax = Math.max(colMax, colSum[j]);
    // ||P||_2 <= sqrt(||P||_1 ||P||_inf), and ||P||_2 <= ||P0||_2 + ||P - P0||_F.
    const pBar = Math.min(Math.sqrt(colMax * rowMax), hb.pNorm + Math.sqrt(dev2));
    // The t3 structure (docs/math.md section 2) with each centre quantity replaced by its sup.
    const paths = (hb.wqKc + hb.qWk + 2 * hb.m * r) * (hb.vc + hb.wv * r);
    return pBar * hb.wv + sMax * paths * scale;
  };
  const factor = (r: number, rule: SigmaRule) => {
    let sum = 0;
    for (const hb of ballHeads) sum += headFactor(hb, r, rule) ** 2;
    return woNorm * Math.sqrt(sum);
  };
  return { kind: layer.kind, name: layer.name, out, rows: n, width: d, factor, children: [] };
};

/** The product of the children's factors, each at the radius its input can reach. */
function chain(children: readonly BallLayer[], r: number, rule: SigmaRule): number {
  let product = 1;
  let radius = r;
  for (const c of children) {
    const f = c.factor(radius, rule);
    product *= f;
    radius *= f;
  }
  return product;
}

/** The children of a composite, each built at its predecessor's centre output. */
function buildChildren(
  layer: TracedLayer,
  x: Float64Array,
  rows: number,
  width: number,
  ctx: BallContext,
) {
  const children: BallLayer[] = [];
  let cur = { out: x, rows, width };
  for (const child of layer.children ?? []) {
    const built = ballLayer(child, cur.out, cur.rows, cur.width, ctx);
    children.push(built);
    cur = built;
  }
  return { children, last: cur };
}

const residualKind: BallKind = (layer, x, rows, width, ctx) => {
  const { children, last } = buildChildren(layer, x, rows, width, ctx);
  if (children.length === 0)
    throw new RangeError(`certify: ${layer.name}: residual with no branch`);
  if (last.rows !== rows || last.width !== width)
    throw new RangeError(`certify: ${layer.name}: the branch changes the shape`);
  const out = x.map((v, i) => v + last.out[i]);
  // x + g(x): ||I + Dg|| <= 1 + sup ||Dg|| over the ball.
  return {
    kind: layer.kind,
    name: layer.name,
    out,
    rows,
    width,
    factor: (r, rule) => 1 + chain(children, r, rule),
    children,
  };
};

const sequenceKind: BallKind = (layer, x, rows, width, ctx) => {
  const { children, last } = buildChildren(layer, x, rows, width, ctx);
  return {
    kind: layer.kind,
    name: layer.name,
    out: last.out,
    rows: last.rows,
    width: last.width,
    factor: (r, rule) => chain(children, r, rule),
    children,
  };
};

/** The kinds certify has over-the-ball rules for. */
const BALL_KINDS: Readonly<Record<string, BallKind>> = {
  layerNorm: layerNormKind,
  finalNorm: finalNormKind,
  pool: poolKind,
  pooler: poolerKind,
  linear: linearKind,
  mlp: mlpKind,
  attention: attentionKind,
  residual: residualKind,
  sequence: sequenceKind,
};

/** The layer kinds with over-the-ball rules (the embeddings are the input's: ballNetwork.ts). */
export const BALL_KIND_NAMES: readonly string[] = Object.keys(BALL_KINDS);

/**
 * One traced layer over the ball, at its centre input x [rows, width] (float64).
 *
 * @throws InputError naming the layer when its kind has no over-the-ball rule (L2 attention, a
 *   registered plug-in kind); Error naming a missing weight; RangeError on a missing setting or
 *   a shape that does not fit.
 * @example ballLayer(trace.layers[1], seq, n, d, ctx).factor(0.01, "dist")
 */
export function ballLayer(
  layer: TracedLayer,
  x: Float64Array,
  rows: number,
  width: number,
  ctx: BallContext,
): BallLayer {
  const kind = BALL_KINDS[layer.kind];
  if (kind === undefined)
    throw new InputError(
      `certify: layer ${layer.name} is of kind "${layer.kind}", which has no over-the-ball rule (certify covers ${BALL_KIND_NAMES.join(", ")}: dot-product attention only; docs/math.md section 7)`,
    );
  if (x.length !== rows * width)
    throw new RangeError(
      `certify: ${layer.name}: input of ${x.length} values, expected ${rows} x ${width}`,
    );
  return kind(layer, x, rows, width, ctx);
}

/**
 * A chain of layers' factor at input radius r ({@link chain}): prod_k S_k(r_k), r_0 = r,
 * r_{k+1} = S_k(r_k) r_k.
 *
 * @example chainFactor(network.layers, 0.01, "dist")
 */
export function chainFactor(layers: readonly BallLayer[], r: number, rule: SigmaRule): number {
  return chain(layers, r, rule);
}
