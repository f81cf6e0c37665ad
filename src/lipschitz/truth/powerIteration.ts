import { tf } from "../../backend.ts";
import type { AttentionParams } from "../../nn/attention.ts";
import { blockAttention, blockParams, transformerBlock } from "../../nn/block.ts";
import type { L2AttentionParams } from "../../nn/l2Attention.ts";
import { allowedKeys, maskOffset } from "../../nn/mask.ts";
import type { TransformerClassifier } from "../../nn/model.ts";
import { mulberry32 } from "../../nn/prng.ts";
import { euclideanNorm, symEigen } from "../linalg.ts";
import { NonFiniteError } from "../../util/errors.ts";
import { jvp, outputShape, vjp, type TensorFn } from "./jacobianProducts.ts";
import {
  linearizeAttention,
  linearizeBlock,
  linearizeHead,
  type Linearization,
} from "./linearize.ts";

/**
 * Power iteration for the local Lipschitz constant ||Df(x)||_2 (docs/math.md section 5), and
 * wrappers for one transformer block, one attention layer and one attention head of a model.
 */

/** Options of {@link powerIterationLipschitz}. */
export interface PowerIterationOptions {
  /**
   * Cap on the products with Df^T Df (each one JVP + one VJP), over the whole run: the
   * iteration stops earlier as soon as the residual test holds. Default 1000.
   */
  maxIterations?: number;
  /**
   * Residual tolerance: converged when ||A u - lambda u|| <= tolerance * lambda for the unit
   * Ritz vector u, lambda = u^T A u, A = Df^T Df (see {@link powerIterationLipschitz}).
   * Default 1e-6 (float32 products leave a residual floor of about 3e-8 to 1e-7 on attnlip's
   * models, so smaller values may never be reached: the result then says unconverged).
   */
  tolerance?: number;
  /** Seed of the random (standard normal) start, of the probe and of restarts. Default 0. */
  seed?: number;
  /**
   * Start vector with x.size entries (default: seeded random). An equally weighted seeded
   * random probe is added to it, so a start that is an eigenvector of Df^T Df (another
   * singular direction) or lies in its null space cannot end the search.
   */
  start?: ArrayLike<number>;
  /** Random directions allowed when the search space collapses or stops growing. Default 3. */
  maxRestarts?: number;
  /** Largest search space kept before a thick restart (>= 3). Default 24. */
  basisSize?: number;
}

/**
 * How {@link powerIterationLipschitz} estimates: thick-restart Lanczos (Krylov power iteration,
 * Rayleigh-Ritz in float64) on Df^T Df from JVP/VJP products, a start and a random probe,
 * stopped by a residual test. Recorded beside every estimate.
 */
export const TRUTH_METHOD = "lanczos";

/** Result of {@link powerIterationLipschitz}: an estimate and how it was made. */
export interface PowerIterationResult {
  /**
   * The estimate sqrt(u^T A u) = ||Df(x) u|| for the unit Ritz vector u: never above
   * ||Df(x)||_2 beyond float32 rounding (an estimate from below, never a bound).
   */
  value: number;
  /** {@link TRUTH_METHOD}. */
  method: typeof TRUTH_METHOD;
  /** Products with Df^T Df run (each one JVP + one VJP), across restarts. */
  iterations: number;
  /**
   * Relative residual ||A u - lambda u|| / lambda of the returned u (lambda = value^2); 0 when
   * Df(x) vanished on every tried direction; Infinity when nothing was computed.
   */
  residual: number;
  /** The tolerance the residual was tested against. */
  tolerance: number;
  /**
   * Last relative change of the value between two steps (Infinity after one). Informative only:
   * a small change does not mean convergence (slow progress when singular values are close).
   */
  relativeChange: number;
  /**
   * residual <= tolerance (from a start with a random part); or Df(x) v = 0 in float32 at every
   * scale up to 2^120 (||Df(x) v|| below about 1e-80) on the start and on `maxRestarts` random
   * directions. See {@link powerIterationLipschitz} for what this
   * guarantees and what it does not.
   */
  converged: boolean;
  /** Random directions added because the search space collapsed (image 0) or stopped growing. */
  restarts: number;
}

/**
 * The largest power-of-two exponent a product's tangent or cotangent is scaled by: its largest
 * entry then stays below 2^120 = 1.3e36, inside float32's range (3.4e38).
 */
const MAX_EXPONENT = 120;

/** A product whose largest entry lies within 2^(+-this) of 1 is kept as it is. */
const IN_RANGE = 20;

/** Largest |entry| of values, NaN when one is not finite. */
function maxAbs(values: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < values.length; i++) {
    const a = Math.abs(values[i]);
    if (!(a < Infinity)) return Number.NaN;
    if (a > m) m = a;
  }
  return m;
}

/**
 * A linear float32 product run at a power-of-two scale that keeps it inside float32's range:
 * run(2^e) for exponents e in [-MAX_EXPONENT, MAX_EXPONENT], starting at `start`, until the
 * largest entry is finite and within 2^(+-IN_RANGE) of 1 (a power of two scales a float32
 * product exactly, so only under- and overflow change). Gives up after 12 tries with the last
 * finite non-zero result, or zeros when every scale up to 2^MAX_EXPONENT gave exactly 0.
 *
 * @param run the product of the tangent (or cotangent) scaled by the given factor, read back.
 * @returns the values at scale 2^exponent (divide by it), or null values when the product is 0
 *   at every scale tried.
 * @throws NonFiniteError when no scale gives a finite product (`what` names it).
 */
function scaledProduct(
  run: (scale: number) => Float32Array,
  start: number,
  what: string,
): { values: Float32Array | null; exponent: number } {
  let e = start;
  let overflow = Infinity; // the lowest exponent that gave a non-finite product
  let underflow = -Infinity; // the highest exponent that gave exactly 0
  let found: { values: Float32Array; exponent: number } | null = null;
  let bad = 0;
  for (let tries = 0; tries < 12; tries++) {
    const values = run(2 ** e);
    const m = maxAbs(values);
    let next: number;
    if (Number.isNaN(m)) {
      overflow = Math.min(overflow, e);
      bad = values.find((v) => !Number.isFinite(v)) ?? Number.NaN;
      next = e - 64;
    } else if (m === 0) {
      underflow = Math.max(underflow, e);
      next = e + 64;
    } else {
      found = { values, exponent: e };
      const shift = -Math.round(Math.log2(m));
      if (Math.abs(shift) <= IN_RANGE) break;
      next = e + shift;
    }
    next = Math.max(-MAX_EXPONENT, Math.min(MAX_EXPONENT, next));
    if (!(next > underflow && next < overflow))
      next = Math.floor(
        (Math.max(underflow, -MAX_EXPONENT) + Math.min(overflow, MAX_EXPONENT)) / 2,
      );
    if (next === e || next <= underflow || next >= overflow) break;
    e = next;
  }
  if (found !== null) return found;
  if (overflow === Infinity) return { values: null, exponent: e };
  throw new NonFiniteError(
    `power iteration: ${what} has a non-finite entry (${bad}) at every scale of the direction from 2^${-MAX_EXPONENT} to 2^${MAX_EXPONENT}: the model's Jacobian overflows float32 (weights far too large?)`,
  );
}

/** A new direction whose part outside the search space is below this fraction is "in the space". */
const IN_SPAN = 1e-10;

/**
 * Euclidean norm (scaled before squaring, so no underflow or overflow) and the unit vector.
 * The zero vector (or an empty one) normalises to the zero vector with norm 0, never NaN.
 *
 * @returns {unit, norm}: unit is a new Float64Array of the same length.
 * @throws Error when an entry is not finite.
 * @example normalize([3, 4]) // {unit: [0.6, 0.8], norm: 5}
 */
export function normalize(vec: ArrayLike<number>): { unit: Float64Array; norm: number } {
  for (let i = 0; i < vec.length; i++)
    if (!Number.isFinite(vec[i])) throw new Error(`normalize: entry ${i} is ${vec[i]}`);
  const unit = new Float64Array(vec.length);
  const norm = euclideanNorm(vec);
  if (norm === 0) return { unit, norm: 0 };
  for (let i = 0; i < vec.length; i++) unit[i] = vec[i] / norm;
  return { unit, norm };
}

function randomNormal(n: number, rand: () => number): Float64Array {
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const u = Math.max(rand(), 1e-300);
    out[i] = Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * rand());
  }
  return out;
}

function positiveInt(name: string, v: number): number {
  if (!Number.isInteger(v) || v < 1)
    throw new RangeError(`power iteration: ${name} must be a positive integer, got ${v}`);
  return v;
}

function dot(a: Float64Array, b: Float64Array): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i] * b[i];
  return s;
}

/** sum_i c[i] * vs[i] (vs non-empty, all of one length). */
function combine(vs: Float64Array[], c: ArrayLike<number>): Float64Array {
  const out = new Float64Array(vs[0].length);
  vs.forEach((v, i) => {
    const ci = c[i];
    if (ci !== 0) for (let k = 0; k < out.length; k++) out[k] += ci * v[k];
  });
  return out;
}

/** Eigenpairs of the small symmetric h [m, m], largest first: values and coefficient vectors. */
function ritzPairs(h: Float64Array, m: number): { values: number[]; vectors: Float64Array[] } {
  const { values, vectors } = symEigen(h, m);
  const order = Array.from({ length: m }, (_, i) => i).sort((a, b) => values[b] - values[a]);
  return {
    values: order.map((i) => values[i]),
    vectors: order.map((i) => Float64Array.from({ length: m }, (_, k) => vectors[k * m + i])),
  };
}

/**
 * Estimates the local Lipschitz constant ||Df(x)||_2 (largest singular value of the Jacobian of
 * f at x, Euclidean norms on the flattened input and output; docs/math.md section 5 "True
 * values") from products with A = Df(x)^T Df(x): Df v by {@link jvp} (double-VJP trick) and
 * Df^T w by {@link vjp}, both float32 tensor ops; everything else is float64 on the JS side.
 *
 * Method ({@link TRUTH_METHOD}): thick-restart Lanczos, i.e. power iteration that keeps its
 * Krylov space. The search space starts from one vector v0: a seeded standard normal vector, or
 * with `start`, the unit start plus an equally weighted unit random probe (so an explicit start
 * has the protection of a random one). It grows by the residual A u - lambda u of the top Ritz
 * pair (u, lambda) of A on the space (Rayleigh-Ritz, float64 Jacobi), and at `basisSize`
 * vectors restarts from its top third of Ritz vectors. Without restarts the space is the Krylov
 * space of v0, which contains the power iterates A^k v0, so the value is at least plain power
 * iteration's from v0 after as many products; with close singular values it needs about the
 * square root of power iteration's count (measured on vit-tiny heads: 6 to 18 products
 * against 7 to 3000).
 *
 * The value sqrt(lambda) = ||Df(x) u|| never exceeds ||Df(x)||_2 beyond float32 rounding: it is
 * an estimate from below, never a bound (an upper bound must come from the bound rules).
 *
 * What `converged` guarantees: (1) the residual test ||A u - lambda u|| <= tolerance * lambda
 * holds, so, A being symmetric, lambda lies within tolerance * lambda of SOME eigenvalue of A,
 * i.e. the value lies within about tolerance / 2 (relative) of some singular value of Df(x); if
 * that is the largest, s_1, and lambda exceeds the next eigenvalue s_2^2, then
 * s_1^2 - lambda <= (tolerance * lambda)^2 / (lambda - s_2^2) (Kato-Temple): for tolerance 1e-6
 * and singular values 1 and 0.999, the value is within 3e-10 of s_1. (2) v0 has a random
 * Gaussian part, so a start on another singular direction or in the null space cannot end the
 * search there. It does NOT prove that the singular value found is the largest, and no test
 * on products can: a miss needs the top singular direction to be missing from v0 and from
 * every vector built from it to working precision (probability 0 for the Gaussian part in exact
 * arithmetic; like any Krylov method it can stop early if that component is tiny). Unconverged
 * (the cap came first): the value is still from below, by an unknown amount.
 *
 * Scale: each product runs at a power-of-two scale of its direction (up to 2^+-120) chosen
 * so that it stays inside float32's range, and the scales are undone in float64 (exact: a power
 * of two scales a float32 product without rounding). Without it Df^T Df v ~ L^2 underflowed to 0
 * for L below about 1e-19 (constants 1e-25 and 1e-31 were a converged 0) and overflowed above
 * about 1e19 (1e25 threw). Measured on a 3 x 3 tanh map times a constant: exact to 1e-7 from
 * 1e-70 to 1e60 (1e-42: 5e-4, the constant itself being a float32 subnormal; 1e-80: 7e-4, and
 * reported unconverged); the map's own forward pass must stay in float32 (a constant above
 * 3.4e38 applied at once overflows there, whatever the scale).
 *
 * Zero: if Df(x) v is exactly 0 even at the largest scale (2^120, so ||Df(x) v|| below about
 * 1e-80 for a unit v) for every direction tried, random directions are added; after
 * `maxRestarts` of them the result is value 0, residual 0, converged = true: Df(x) vanishes on
 * every tried direction as far as float32 can see (a map such as x -> 0 * x, or one whose
 * constant is below about 1e-80). Any non-zero product, however small, is an estimate like any
 * other, never 0.
 *
 * @param f deterministic differentiable map on float32 tensors (dropout off).
 * @param x float32 point, any shape (not disposed).
 * @returns see {@link PowerIterationResult}. Leaves tf.memory().numTensors unchanged.
 * @throws RangeError on bad options or a start of the wrong length; NonFiniteError (a
 *   RangeError) when a product is not finite at any scale of its direction (NaN/Inf in f or its
 *   gradient); TypeError when x is not float32.
 * @example
 * // ||diag(1, 0.999, 0.5)||_2 = 1, converged after 3 products (the space then spans R^3)
 * const r = powerIterationLipschitz((t) => tf.mul(t, tf.tensor1d([1, 0.999, 0.5])), tf.ones([3]));
 * // r.value ~ 1, r.converged, r.method === "lanczos"
 */
export function powerIterationLipschitz(
  f: TensorFn,
  x: tf.Tensor,
  options: PowerIterationOptions = {},
): PowerIterationResult {
  if (x.dtype !== "float32")
    throw new TypeError(`power iteration: x must be float32, got ${x.dtype}`);
  // Options are checked before the first forward pass (outputShape runs f).
  checkPowerIterationOptions(options, x.size);
  const outShape = x.size === 0 ? [] : outputShape(f, x);
  return linearMapLipschitz(
    {
      inShape: x.shape.slice(),
      outShape,
      jvp: (t) => jvp(f, x, t, outShape),
      vjp: (u) => vjp(f, x, u),
    },
    options,
  );
}

/**
 * A linear map J: R^D -> R^M given by its products, e.g. the Jacobian Df(x) of a map at a point
 * (src/lipschitz/truth/linearize.ts builds them for a transformer block without second-order
 * gradients).
 */
export interface LinearProducts {
  /** The shape of J's input (D entries). */
  inShape: number[];
  /** The shape of J's output (M entries). */
  outShape: number[];
  /** J t for a float32 tangent of inShape; returns a float32 tensor of outShape (caller owns). */
  jvp(t: tf.Tensor): tf.Tensor;
  /** J^T u for a float32 cotangent of outShape; returns a float32 tensor of inShape. */
  vjp(u: tf.Tensor): tf.Tensor;
}

function checkPowerIterationOptions(options: PowerIterationOptions, size: number): void {
  positiveInt("maxIterations", options.maxIterations ?? 1000);
  if (!((options.tolerance ?? 1e-6) >= 0))
    throw new RangeError(`power iteration: tolerance must be >= 0, got ${options.tolerance}`);
  const maxRestarts = options.maxRestarts ?? 3;
  if (!Number.isInteger(maxRestarts) || maxRestarts < 0)
    throw new RangeError(
      `power iteration: maxRestarts must be an integer >= 0, got ${maxRestarts}`,
    );
  const basisSize = options.basisSize ?? 24;
  if (!Number.isInteger(basisSize) || basisSize < 3)
    throw new RangeError(`power iteration: basisSize must be an integer >= 3, got ${basisSize}`);
  if (options.start !== undefined && options.start.length !== size)
    throw new RangeError(
      `power iteration: start has ${options.start.length} entries, x has ${size}`,
    );
}

/**
 * ||J||_2 of a linear map given by its products ({@link LinearProducts}), by the method of
 * {@link powerIterationLipschitz} (which calls it with J = Df(x)): the same options, scales,
 * stopping rule and result.
 *
 * @returns see {@link PowerIterationResult}. Leaves tf.memory().numTensors unchanged.
 * @throws as {@link powerIterationLipschitz}.
 * @example
 * const d = tf.tensor1d([1, 0.999, 0.5]);
 * linearMapLipschitz({ inShape: [3], outShape: [3], jvp: (t) => tf.mul(t, d), vjp: (u) => tf.mul(u, d) }).value // ~1
 */
export function linearMapLipschitz(
  map: LinearProducts,
  options: PowerIterationOptions = {},
): PowerIterationResult {
  const size = map.inShape.reduce((a, b) => a * b, 1);
  checkPowerIterationOptions(options, size);
  const maxIterations = options.maxIterations ?? 1000;
  const tolerance = options.tolerance ?? 1e-6;
  const maxRestarts = options.maxRestarts ?? 3;
  const basisSize = options.basisSize ?? 24;
  if (size === 0)
    return {
      value: 0,
      method: TRUTH_METHOD,
      iterations: 0,
      residual: 0,
      tolerance,
      relativeChange: 0,
      converged: true,
      restarts: 0,
    };
  const rand = mulberry32(options.seed ?? 0);
  const outShape = map.outShape;
  const shape = map.inShape;
  const maxBasis = Math.min(basisSize, size);
  const keep = Math.max(1, Math.min(maxBasis - 2, Math.ceil(maxBasis / 3)));

  // Orthonormal search space V, the products A V, and H = V^T A V (symmetrised), m x m.
  let basis: Float64Array[] = [];
  let images: Float64Array[] = [];
  let h = new Float64Array(0);
  let iterations = 0;

  /** Runs a float32 product on `values` (shape `of`) and reads it back. */
  const product = (
    op: (t: tf.Tensor) => tf.Tensor,
    values: ArrayLike<number>,
    scale: number,
    of: number[],
  ): Float32Array => {
    // Plain loops, here and below, with the powers of two hoisted: a callback or a 2 ** e per
    // entry cost about 60 ms of JavaScript per product on a BERT-base block's 98,304 entries.
    const scaled = new Float32Array(values.length);
    for (let i = 0; i < scaled.length; i++) scaled[i] = values[i] * scale;
    const z = tf.tidy(() => op(tf.tensor(scaled, of, "float32")));
    const data = z.dataSync() as Float32Array;
    z.dispose();
    return data;
  };
  // Power-of-two scales of the tangent and the cotangent, kept between products: both start at
  // 1 and move only when a product leaves float32's comfortable range.
  let tangentExponent = 0;
  let cotangentExponent = 0;

  /**
   * A v = Df^T (Df v): two float32 products, each run at a power-of-two scale that keeps it in
   * float32's range (a map with constant 1e-31 has Df^T Df v ~ 1e-62, which underflows to 0;
   * one with 1e25 has 1e50, which overflows), the scales undone in float64.
   */
  const apply = (v: Float64Array): Float64Array => {
    iterations++;
    const w = scaledProduct(
      (c) => product((t) => map.jvp(t), v, c, shape),
      tangentExponent,
      "Df v",
    );
    tangentExponent = w.exponent;
    if (w.values === null) return new Float64Array(size); // Df v = 0 at every scale
    // The cotangent Df v, normalised to a largest entry of about 1 (exact: a power of two).
    const norm = -Math.round(Math.log2(maxAbs(w.values)));
    const unit = 2 ** norm;
    const u = new Float64Array(w.values.length);
    for (let i = 0; i < u.length; i++) u[i] = w.values[i] * unit;
    const y = scaledProduct(
      (c) => product((t) => map.vjp(t), u, c, outShape),
      cotangentExponent,
      "Df^T Df v",
    );
    cotangentExponent = y.exponent;
    const out = new Float64Array(size);
    if (y.values === null) return out;
    const undo = -(w.exponent + norm + y.exponent);
    // Two factors: 2^undo alone may leave float64's range although the result does not.
    const half = Math.trunc(undo / 2);
    const f1 = 2 ** half;
    const f2 = 2 ** (undo - half);
    for (let i = 0; i < size; i++) out[i] = y.values[i] * f1 * f2;
    return out;
  };

  /** H with one more row and column for the newest basis vector. */
  const grow = (): void => {
    const m = basis.length;
    const next = new Float64Array(m * m);
    for (let i = 0; i < m - 1; i++)
      for (let j = 0; j < m - 1; j++) next[i * m + j] = h[i * (m - 1) + j];
    const v = basis[m - 1];
    const av = images[m - 1];
    for (let j = 0; j < m; j++) {
      const s = (dot(v, images[j]) + dot(basis[j], av)) / 2;
      next[(m - 1) * m + j] = s;
      next[j * m + m - 1] = s;
    }
    h = next;
  };

  /**
   * Adds the part of q outside the space (two Gram-Schmidt passes) with its product.
   * @returns false when that part is negligible (q lies in the space) or the space is full.
   */
  const add = (q: Float64Array): boolean => {
    if (basis.length >= size) return false;
    const before = euclideanNorm(q);
    if (before === 0) return false;
    const u = Float64Array.from(q);
    for (let pass = 0; pass < 2; pass++)
      for (const b of basis) {
        const c = dot(b, u);
        for (let k = 0; k < size; k++) u[k] -= c * b[k];
      }
    const { unit, norm } = normalize(u);
    if (!(norm > IN_SPAN * before)) return false;
    basis.push(unit);
    images.push(apply(unit));
    grow();
    return true;
  };

  /** Keeps the top `keep` Ritz vectors of the space (and their products: no new products). */
  const thickRestart = (coefficients: Float64Array[]): void => {
    const kept = coefficients.slice(0, keep);
    const nextBasis = kept.map((c) => combine(basis, c));
    const nextImages = kept.map((c) => combine(images, c));
    basis = [];
    images = [];
    h = new Float64Array(0);
    nextBasis.forEach((b, i) => {
      basis.push(b);
      images.push(nextImages[i]);
      grow();
    });
  };

  let restarts = 0;
  const randomDirection = (): Float64Array => randomNormal(size, rand);
  // The Krylov start: the seeded random vector, or the unit start plus an equally weighted
  // unit random probe, so that an explicit start gets the protection of a random one.
  let v0 = randomDirection();
  if (options.start !== undefined) {
    const given = normalize(options.start).unit;
    const probe = normalize(v0).unit;
    v0 = given.map((g, i) => g + probe[i]);
  }
  if (!add(v0)) add(randomDirection());

  let value = 0;
  let residual = Infinity;
  let relativeChange = Infinity;
  let converged = false;
  for (;;) {
    const m = basis.length;
    const ritz = ritzPairs(h, m);
    const lambda = Math.max(ritz.values[0], 0);
    const s = ritz.vectors[0];
    const next = Math.sqrt(lambda);
    relativeChange = value > 0 && next > 0 ? Math.abs(next - value) / next : Infinity;
    value = next;
    if (!(value > 0)) {
      // Df vanishes on the whole space so far: try random directions before concluding 0.
      value = 0;
      residual = 0;
      if (restarts >= maxRestarts) {
        converged = true;
        break;
      }
      if (iterations >= maxIterations || basis.length >= size) {
        converged = basis.length >= size;
        break;
      }
      restarts++;
      if (m >= maxBasis) thickRestart(ritz.vectors);
      if (!add(randomDirection())) break;
      continue;
    }
    const u = combine(basis, s);
    const r = combine(images, s);
    for (let k = 0; k < size; k++) r[k] -= lambda * u[k];
    residual = euclideanNorm(r) / lambda;
    if (residual <= tolerance) {
      converged = true;
      break;
    }
    if (iterations >= maxIterations || basis.length >= size) break;
    if (m >= maxBasis) thickRestart(ritz.vectors);
    if (!add(r)) {
      // The space stopped growing (q lies in it): a random direction, while restarts last.
      if (restarts >= maxRestarts) break;
      restarts++;
      if (!add(randomDirection())) break;
    }
  }
  return {
    value,
    method: TRUTH_METHOD,
    iterations,
    residual,
    tolerance,
    relativeChange,
    converged,
    restarts,
  };
}

/** Whether the model's attention is causal (text config `causal`). */
function isCausal(model: TransformerClassifier): boolean {
  return model.config.kind === "text" && model.config.causal;
}

function checkSequence(name: string, model: TransformerClassifier, seq: tf.Tensor): number {
  const d = model.config.dModel;
  if (seq.rank !== 3 || seq.shape[0] !== 1 || seq.shape[2] !== d)
    throw new RangeError(`${name}: input must be [1, n, ${d}], got [${seq.shape.join(", ")}]`);
  if (seq.dtype !== "float32")
    throw new TypeError(`${name}: input must be float32, got ${seq.dtype}`);
  return seq.shape[1] as number;
}

function checkBlockIndex(name: string, model: TransformerClassifier, i: number): void {
  if (!Number.isInteger(i) || i < 0 || i >= model.config.blocks)
    throw new RangeError(`${name}: block index ${i} is outside [0, ${model.config.blocks})`);
}

/**
 * Indices of the real rows of a padding mask [1, n] (all rows when null).
 * @throws RangeError when the mask is not [1, n] or has no real row.
 */
function realRows(name: string, mask: tf.Tensor | null | undefined, n: number): number[] {
  if (mask == null) return Array.from({ length: n }, (_, i) => i);
  if (mask.rank !== 2 || mask.shape[0] !== 1 || mask.shape[1] !== n)
    throw new RangeError(`${name}: mask must be [1, ${n}], got [${mask.shape.join(", ")}]`);
  const m = mask.dataSync();
  const rows: number[] = [];
  for (let i = 0; i < n; i++) if (m[i] !== 0) rows.push(i);
  if (rows.length === 0) throw new RangeError(`${name}: the mask has no real token`);
  return rows;
}

/**
 * Runs power iteration on `full` (a map [1, n, d] -> [1, n, e]) at `seq`, restricted to the
 * real rows when some rows are padding: input directions move only real rows and only real
 * rows of the output count (padding rows are never attended to and never pooled).
 */
function onRealRows(
  full: TensorFn,
  seq: tf.Tensor,
  rows: number[],
  options: PowerIterationOptions,
  linear: Linearization | null = null,
): PowerIterationResult {
  const n = seq.shape[1] as number;
  const d = seq.shape[2] as number;
  if (rows.length === n)
    return linear === null
      ? powerIterationLipschitz(full, seq, options)
      : linearMapLipschitz(
          linearProducts(linear.tangent, linear.cotangent, seq.shape.slice(), full, seq),
          options,
        );
  const r = rows.length;
  const sel = new Float32Array(r * n);
  rows.forEach((row, i) => (sel[i * n + row] = 1));
  const keep = new Float32Array(n);
  rows.forEach((row) => (keep[row] = 1));
  const [select, scatter, padPart, point] = tf.tidy(() => {
    const s = tf.tensor2d(sel, [r, n]);
    const st = tf.transpose(s);
    const flat = tf.reshape(seq, [n, d]);
    const pad = tf.mul(flat, tf.reshape(tf.sub(1, tf.tensor1d(keep)), [n, 1]));
    return [s, st, pad, tf.reshape(tf.matMul(s, flat), [1, r, d])];
  });
  try {
    const restrict =
      (map: TensorFn, base: tf.Tensor | null): TensorFn =>
      (e) => {
        const width = e.shape[2] as number;
        const spread = tf.matMul(scatter, tf.reshape(e, [r, width]));
        const x = tf.reshape(base === null ? spread : tf.add(base, spread), [1, n, width]);
        const y = map(x);
        const out = y.shape[2] as number;
        return tf.reshape(tf.matMul(select, tf.reshape(y, [n, out])), [1, r, out]);
      };
    const g = restrict(full, padPart);
    if (linear === null) return powerIterationLipschitz(g, point, options);
    // Df restricted to the real rows: S Df(X) S^T (the padding rows' part of X is constant).
    return linearMapLipschitz(
      linearProducts(
        restrict(linear.tangent, null),
        restrict(linear.cotangent, null),
        [1, r, d],
        g,
        point,
      ),
      options,
    );
  } finally {
    tf.dispose([select, scatter, padPart, point]);
  }
}

/**
 * The products of Df(x) for {@link linearMapLipschitz}: Df(x) t by `tangent` (forward mode at x,
 * src/lipschitz/truth/linearize.ts: about one forward pass, where the double-VJP trick costs a
 * second-order gradient) and Df(x)^T u by `cotangent` (the differentials' adjoints in reverse
 * order, about one forward pass, where tfjs's backward pass of f re-runs the forward: 0.4 s of
 * a 0.49 s product on a BERT-base block). f and x give the output's shape.
 */
function linearProducts(
  tangent: TensorFn,
  cotangent: TensorFn,
  inShape: number[],
  f: TensorFn,
  x: tf.Tensor,
): LinearProducts {
  return {
    inShape,
    outShape: outputShape(f, x),
    jvp: (t) => tf.tidy(() => tangent(t)),
    vjp: (u) => tf.tidy(() => cotangent(u)),
  };
}

/**
 * ||Df(X)||_2 of transformer block `blockIndex` (f = the whole block, residuals and LayerNorms
 * included) at its input X, by {@link powerIterationLipschitz}. With a padding mask only the
 * real-token rows are inputs and outputs (see the module wrappers' note).
 *
 * Formula source: docs/math.md section 5 "True values".
 *
 * @param blockInput float32 [1, n, d] (e.g. trace.blocks[i].input of one example).
 * @param mask optional padding mask [1, n], 1 = real token (causality comes from the config).
 * @param options as {@link powerIterationLipschitz} (cap 1000 products, residual tolerance 1e-6).
 * @returns the estimate (from below; never a bound) and how it was made: method, iterations,
 *   residual, converged (a unitless gain: output norm per input norm).
 * @throws RangeError on a bad block index, input shape or mask; as powerIterationLipschitz.
 * @example
 * const r = blockLipschitz(model, 0, trace.blocks[0].input); // one example's trace
 * if (!r.converged) console.warn(`block 0: ${r.value} after ${r.iterations} products, unconverged`);
 */
export function blockLipschitz(
  model: TransformerClassifier,
  blockIndex: number,
  blockInput: tf.Tensor,
  mask: tf.Tensor | null = null,
  options: PowerIterationOptions = {},
): PowerIterationResult {
  checkBlockIndex("blockLipschitz", model, blockIndex);
  const n = checkSequence("blockLipschitz", model, blockInput);
  const rows = realRows("blockLipschitz", mask, n);
  const allowed = allowedKeys(mask, isCausal(model), n);
  try {
    const p = blockParams(model.params, blockIndex);
    const f: TensorFn = (x) => transformerBlock(x, p, model.blockConfig, { allowed }).out;
    const linear =
      model.blockConfig.attention !== "l2" && "wk" in p.attn
        ? linearizeBlock(blockInput, p, model.blockConfig, allowed)
        : null;
    try {
      return onRealRows(f, blockInput, rows, options, linear);
    } finally {
      linear?.dispose();
    }
  } finally {
    allowed?.dispose();
  }
}

/**
 * ||Df(X)||_2 of block `blockIndex`'s multi-head attention sub-layer (output projection and its
 * bias included, no residual, no LayerNorm) at its input X = trace.blocks[i].attnInput.
 *
 * Formula source: docs/math.md section 5 "True values".
 *
 * @param attnInput float32 [1, n, d].
 * @param mask optional padding mask [1, n].
 * @returns the estimate and how it was made, as {@link blockLipschitz}.
 * @throws as {@link blockLipschitz}.
 * @example attentionLayerLipschitz(model, 0, trace.blocks[0].attnInput).value
 */
export function attentionLayerLipschitz(
  model: TransformerClassifier,
  blockIndex: number,
  attnInput: tf.Tensor,
  mask: tf.Tensor | null = null,
  options: PowerIterationOptions = {},
): PowerIterationResult {
  checkBlockIndex("attentionLayerLipschitz", model, blockIndex);
  const n = checkSequence("attentionLayerLipschitz", model, attnInput);
  const rows = realRows("attentionLayerLipschitz", mask, n);
  const allowed = allowedKeys(mask, isCausal(model), n);
  try {
    const p = blockParams(model.params, blockIndex).attn;
    const f: TensorFn = (x) => blockAttention(x, p, model.blockConfig, allowed).out;
    const linear =
      "wk" in p && model.blockConfig.attention !== "l2"
        ? linearizeAttention(attnInput, p, model.config.heads, allowed)
        : null;
    try {
      return onRealRows(f, attnInput, rows, options, linear);
    } finally {
      linear?.dispose();
    }
  } finally {
    allowed?.dispose();
  }
}

/**
 * One head's map X -> P_h V_h (docs/math.md section 2), computed from the layer weights with tfjs
 * ops: Q_h = X W_Q[:, h] + b_Q[h] (columns h*d_k .. (h+1)*d_k - 1), likewise K_h, V_h;
 * P_h = rowsoftmax(Q_h K_h^T / sqrt(d_k)) with masked keys at probability 0. Agrees with
 * multiHeadAttention's P and V (its context before W_O). Parameters without a key weight wk are
 * an L2 layer's (src/nn/l2Attention.ts, Kim et al.'s L2-MHA): K_h = Q_h = X W^{Q,h} (tied, no
 * query bias), scores -||q_i - k_j||^2 / sqrt(d_k) (computed as l2MultiHeadAttention does,
 * without the row constant) and values V_h = Q_h W^{Q,h}^T W^{V,h} / sqrt(d_k) + b_V[h]
 * (= X A^h W^{V,h} + b_V[h]), agreeing with its P and V.
 *
 * @param x float32 [b, n, d].
 * @param allowed optional mask broadcastable to [b, 1, n, n] (mask.ts), or null.
 * @returns float32 [b, n, d_k].
 * @throws RangeError when head is outside [0, heads) or d is not divisible by heads.
 * @example headOutput(x, blockParams(model.params, 0).attn, 4, 2) // head 2 of 4: [b, n, d / 4]
 */
export function headOutput(
  x: tf.Tensor,
  p: AttentionParams | L2AttentionParams,
  heads: number,
  head: number,
  allowed: tf.Tensor | null = null,
): tf.Tensor {
  return tf.tidy(() => headParts(x, p, heads, head, allowed).out);
}

/**
 * {@link headOutput} and its parts at x: queries q (before the 1/sqrt(d_k) scale), keys k, values
 * v [b, n, d_k], probabilities p [b, n, n] and out = p v (new tensors, the caller's to free).
 */
function headParts(
  x: tf.Tensor,
  p: AttentionParams | L2AttentionParams,
  heads: number,
  head: number,
  allowed: tf.Tensor | null,
): { q: tf.Tensor; k: tf.Tensor; v: tf.Tensor; p: tf.Tensor; out: tf.Tensor } {
  const [b, n, d] = x.shape as [number, number, number];
  if (d % heads !== 0) throw new RangeError(`headOutput: d = ${d} is not divisible by ${heads}`);
  if (!Number.isInteger(head) || head < 0 || head >= heads)
    throw new RangeError(`headOutput: head ${head} is outside [0, ${heads})`);
  const dk = d / heads;
  return tf.tidy(() => {
    const flat = tf.reshape(x, [b * n, d]);
    const proj = (w: tf.Tensor, bias: tf.Tensor | undefined) => {
      let y = tf.matMul(flat, tf.slice(w, [0, head * dk], [d, dk]));
      if (bias !== undefined) y = tf.add(y, tf.slice(bias, [head * dk], [dk]));
      return tf.reshape(y, [b, n, dk]);
    };
    let scores: tf.Tensor;
    let q: tf.Tensor;
    let k: tf.Tensor;
    let v: tf.Tensor;
    if ("wk" in p) {
      q = proj(p.wq, p.bq);
      v = proj(p.wv, p.bv);
      k = proj(p.wk, p.bk);
      scores = tf.matMul(tf.mul(q, 1 / Math.sqrt(dk)), k, false, true);
    } else {
      q = proj(p.wq, undefined);
      k = q;
      const wqh = tf.slice(p.wq, [0, head * dk], [d, dk]);
      const wvh = tf.slice(p.wv, [0, head * dk], [d, dk]);
      const m = tf.mul(tf.matMul(wqh, wvh, true, false), 1 / Math.sqrt(dk));
      v = tf.reshape(tf.matMul(tf.reshape(q, [b * n, dk]), m), [b, n, dk]);
      if (p.bv !== undefined) v = tf.add(v, tf.slice(p.bv, [head * dk], [dk]));
      const keyNorms = tf.reshape(tf.sum(tf.square(q), -1), [b, 1, n]);
      const cross = tf.matMul(tf.mul(q, 2), q, false, true);
      scores = tf.mul(tf.sub(cross, keyNorms), 1 / Math.sqrt(dk));
    }
    let mask3: tf.Tensor | null = null;
    if (allowed !== null) {
      const s = allowed.shape as number[];
      mask3 = tf.reshape(allowed, [s[0], s[2], s[3]]);
      scores = tf.add(scores, maskOffset(mask3));
    }
    let probs = tf.softmax(scores, -1);
    if (mask3 !== null) probs = tf.mul(probs, mask3);
    return { q, k, v, p: probs, out: tf.matMul(probs, v) };
  });
}

/**
 * ||Df_h(X)||_2 of head `head` of block `blockIndex`, f_h(X) = P_h V_h ([1, n, d_k], before the
 * output projection; for L2 attention V_h = X A^h W^{V,h} + b_V[h], {@link headOutput}), at the attention input X = trace.blocks[i].attnInput.
 *
 * Formula source: docs/math.md section 5 "True values".
 *
 * @param attnInput float32 [1, n, d].
 * @param mask optional padding mask [1, n].
 * @returns the estimate and how it was made (method, iterations, residual, converged), as
 *   {@link blockLipschitz}.
 * @throws as {@link blockLipschitz}; RangeError on a bad head index.
 * @example headLipschitz(model, 0, 1, trace.blocks[0].attnInput) // block 0, head 1
 */
export function headLipschitz(
  model: TransformerClassifier,
  blockIndex: number,
  head: number,
  attnInput: tf.Tensor,
  mask: tf.Tensor | null = null,
  options: PowerIterationOptions = {},
): PowerIterationResult {
  checkBlockIndex("headLipschitz", model, blockIndex);
  const heads = model.config.heads;
  if (!Number.isInteger(head) || head < 0 || head >= heads)
    throw new RangeError(`headLipschitz: head ${head} is outside [0, ${heads})`);
  const n = checkSequence("headLipschitz", model, attnInput);
  const rows = realRows("headLipschitz", mask, n);
  const allowed = allowedKeys(mask, isCausal(model), n);
  try {
    const p = blockParams(model.params, blockIndex).attn;
    const f: TensorFn = (x) => headOutput(x, p, heads, head, allowed);
    let linear: Linearization | null = null;
    if ("wk" in p && model.blockConfig.attention !== "l2") {
      const { out, ...parts } = headParts(attnInput, p, heads, head, allowed);
      out.dispose();
      const d = attnInput.shape[2] as number;
      const dk = d / heads;
      const columns = (w: tf.Tensor) => tf.slice(w, [0, head * dk], [d, dk]);
      linear = linearizeHead(parts, { wq: columns(p.wq), wk: columns(p.wk), wv: columns(p.wv) });
    }
    try {
      return onRealRows(f, attnInput, rows, options, linear);
    } finally {
      linear?.dispose();
    }
  } finally {
    allowed?.dispose();
  }
}
