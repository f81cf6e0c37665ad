import type { NamedArray } from "../nn/params.ts";
import type { TracedLayer } from "../nn/trace.ts";
import { gelu, geluDerivative, geluErf, geluErfDerivative } from "../nn/gelu.ts";
import type { Pooling } from "../nn/pooling.ts";
import { weightSpectralNorm } from "../lipschitz/weightCache.ts";
import { pooledRows, poolBound } from "../lipschitz/rules/output.ts";
import { InputError } from "../util/errors.ts";
import { attentionBallKind } from "./ballAttention.ts";
import {
  activationDerivativeBound,
  layerNormBallFactor,
  tanhDerivativeBound,
  type SigmaRule,
} from "./ballRules.ts";
import {
  affine,
  cached,
  columnNorms,
  need,
  param,
  settingOf,
  type BallContext,
  type BallKind,
  type BallLayer,
} from "./ballTypes.ts";

export type { BallContext, BallLayer } from "./ballTypes.ts";

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
  attention: attentionBallKind,
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
