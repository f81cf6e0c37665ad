import { tf } from "../../backend.ts";
import { mulberry32 } from "../../nn/prng.ts";
import { euclideanNorm, symEigen } from "../linalg.ts";
import { jvp, outputShape, vjp, type TensorFn } from "./jacobianProducts.ts";
import { NormalProducts, type LinearProducts } from "./scaledProducts.ts";

export type { LinearProducts } from "./scaledProducts.ts";

/**
 * Power iteration for the local Lipschitz constant ||Df(x)||_2 (docs/math.md section 5): the
 * thick-restart Lanczos driver on Df^T Df, for a map at a point or for a linear map given by its
 * products. src/lipschitz/truth/powerIteration.ts re-exports it beside its wrappers for one
 * transformer block, attention layer and head.
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
 * The Krylov start: the seeded random vector, or with `start` the unit start plus the equally
 * weighted unit random vector, so that an explicit start gets the protection of a random one.
 */
function krylovStart(random: Float64Array, start: ArrayLike<number> | undefined): Float64Array {
  if (start === undefined) return random;
  const given = normalize(start).unit;
  const probe = normalize(random).unit;
  return given.map((g, i) => g + probe[i]);
}

/**
 * The search space of {@link linearMapLipschitz}: an orthonormal basis V, the products A V, and
 * H = V^T A V (symmetrised), m x m, grown one vector at a time and thick-restarted.
 */
class SearchSpace {
  basis: Float64Array[] = [];
  images: Float64Array[] = [];
  h = new Float64Array(0);

  constructor(
    private readonly size: number,
    private readonly operator: NormalProducts,
  ) {}

  /** H with one more row and column for the newest basis vector. */
  private grow(): void {
    const { basis, images, h } = this;
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
    this.h = next;
  }

  /**
   * Adds the part of q outside the space (two Gram-Schmidt passes) with its product.
   * @returns false when that part is negligible (q lies in the space) or the space is full.
   */
  add(q: Float64Array): boolean {
    const { basis, size } = this;
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
    this.images.push(this.operator.apply(unit));
    this.grow();
    return true;
  }

  /** Keeps the top `keep` Ritz vectors of the space (and their products: no new products). */
  thickRestart(coefficients: Float64Array[], keep: number): void {
    const kept = coefficients.slice(0, keep);
    const nextBasis = kept.map((c) => combine(this.basis, c));
    const nextImages = kept.map((c) => combine(this.images, c));
    this.basis = [];
    this.images = [];
    this.h = new Float64Array(0);
    nextBasis.forEach((b, i) => {
      this.basis.push(b);
      this.images.push(nextImages[i]);
      this.grow();
    });
  }
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
  const maxBasis = Math.min(basisSize, size);
  const keep = Math.max(1, Math.min(maxBasis - 2, Math.ceil(maxBasis / 3)));
  const operator = new NormalProducts(map, size);
  const space = new SearchSpace(size, operator);

  let restarts = 0;
  const randomDirection = (): Float64Array => randomNormal(size, rand);
  if (!space.add(krylovStart(randomDirection(), options.start))) space.add(randomDirection());

  let value = 0;
  let residual = Infinity;
  let relativeChange = Infinity;
  let converged = false;
  for (;;) {
    const m = space.basis.length;
    const ritz = ritzPairs(space.h, m);
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
      if (operator.count >= maxIterations || space.basis.length >= size) {
        converged = space.basis.length >= size;
        break;
      }
      restarts++;
      if (m >= maxBasis) space.thickRestart(ritz.vectors, keep);
      if (!space.add(randomDirection())) break;
      continue;
    }
    const u = combine(space.basis, s);
    const r = combine(space.images, s);
    for (let k = 0; k < size; k++) r[k] -= lambda * u[k];
    residual = euclideanNorm(r) / lambda;
    if (residual <= tolerance) {
      converged = true;
      break;
    }
    if (operator.count >= maxIterations || space.basis.length >= size) break;
    if (m >= maxBasis) space.thickRestart(ritz.vectors, keep);
    if (!space.add(r)) {
      // The space stopped growing (q lies in it): a random direction, while restarts last.
      if (restarts >= maxRestarts) break;
      restarts++;
      if (!space.add(randomDirection())) break;
    }
  }
  return {
    value,
    method: TRUTH_METHOD,
    iterations: operator.count,
    residual,
    tolerance,
    relativeChange,
    converged,
    restarts,
  };
}
