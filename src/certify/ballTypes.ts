import type { NamedArray } from "../nn/params.ts";
import type { TracedLayer } from "../nn/trace.ts";
import { matMulInto } from "../lipschitz/linalg.ts";
import type { SigmaRule } from "./ballRules.ts";

/**
 * What the over-the-ball layer records share (docs/math.md section 7): a layer over its ball
 * ({@link BallLayer}), what one input's layers share ({@link BallContext}), and the small
 * helpers the records use to read weights and settings and to compute in float64.
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
export type BallKind = (
  layer: TracedLayer,
  x: Float64Array,
  rows: number,
  width: number,
  ctx: BallContext,
) => BallLayer;

/**
 * The weight a traced layer names for `role`.
 *
 * @returns the weight, or undefined when it is missing and `optional`.
 * @throws Error naming the layer and the role when a required weight is missing.
 * @example param(layer, "bq", ctx, true) // undefined for a head without a query bias
 */
export function param(
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

/**
 * A required weight of a traced layer.
 *
 * @throws Error naming the layer and the role when it is missing.
 * @example need(layer, "wq", ctx).shape // [d, d]
 */
export function need(layer: TracedLayer, role: string, ctx: BallContext): NamedArray {
  return param(layer, role, ctx) as NamedArray;
}

/**
 * A setting of a traced layer.
 *
 * @throws RangeError naming the layer when it is missing.
 * @example settingOf(layer, "eps") // 1e-5
 */
export function settingOf(layer: TracedLayer, key: string): number | string | boolean {
  const v = layer.settings?.[key];
  if (v === undefined) throw new RangeError(`certify: ${layer.name}: setting "${key}" is missing`);
  return v;
}

/**
 * A weight-only quantity, computed once per model (the context's cache outlives one input).
 *
 * @example cached(ctx, `${layer.name}/wo`, () => weightSpectralNorm(wo.data, d, d))
 */
export function cached<T>(ctx: BallContext, key: string, compute: () => T): T {
  if (ctx.cache.has(key)) return ctx.cache.get(key) as T;
  const v = compute();
  ctx.cache.set(key, v);
  return v;
}

/**
 * y = x W + b in float64 for x [rows, in], W [in, out], b [out] or undefined.
 *
 * @example affine(x, n, w1, b1) // [n, hidden]
 */
export function affine(
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

/**
 * Euclidean norms of the columns of W [rows, cols] (how far each output moves per unit move of
 * an input row).
 *
 * @example columnNorms(w1) // [hidden]
 */
export function columnNorms(w: NamedArray): Float64Array {
  const [rows, cols] = w.shape;
  const out = new Float64Array(cols);
  for (let i = 0; i < rows; i++) for (let j = 0; j < cols; j++) out[j] += w.data[i * cols + j] ** 2;
  return out.map(Math.sqrt);
}
