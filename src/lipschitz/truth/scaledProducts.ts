import { tf } from "../../backend.ts";
import { NonFiniteError } from "../../util/errors.ts";

/**
 * The products of power iteration (src/lipschitz/truth/lanczos.ts) with A = J^T J for a linear
 * map J given by float32 products: each runs at a power-of-two scale of its direction that keeps
 * it inside float32's range, and the scales are undone in float64.
 */

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

/** Runs a float32 product on `values` (shape `of`) at `scale` and reads it back. */
function product(
  op: (t: tf.Tensor) => tf.Tensor,
  values: ArrayLike<number>,
  scale: number,
  of: number[],
): Float32Array {
  // Plain loops, here and below, with the powers of two hoisted: a callback or a 2 ** e per
  // entry cost about 60 ms of JavaScript per product on a BERT-base block's 98,304 entries.
  const scaled = new Float32Array(values.length);
  for (let i = 0; i < scaled.length; i++) scaled[i] = values[i] * scale;
  const z = tf.tidy(() => op(tf.tensor(scaled, of, "float32")));
  const data = z.dataSync() as Float32Array;
  z.dispose();
  return data;
}

/**
 * A v = J^T (J v) for a linear map J ({@link LinearProducts}): two float32 products, each run at
 * a power-of-two scale that keeps it in float32's range (a map with constant 1e-31 has
 * J^T J v ~ 1e-62, which underflows to 0; one with 1e25 has 1e50, which overflows), the scales
 * undone in float64. The scales of the tangent and the cotangent are kept between products:
 * both start at 1 and move only when a product leaves float32's comfortable range.
 *
 * @example
 * const a = new NormalProducts({ inShape: [2], outShape: [2], jvp: (t) => tf.mul(t, 3), vjp: (u) => tf.mul(u, 3) }, 2);
 * a.apply(Float64Array.of(1, 0)) // [9, 0]; a.count === 1
 */
export class NormalProducts {
  /** Products with J^T J run so far (each one JVP + one VJP). */
  count = 0;
  private tangentExponent = 0;
  private cotangentExponent = 0;

  /** @param size the number of entries of J's input (the product of map.inShape). */
  constructor(
    private readonly map: LinearProducts,
    private readonly size: number,
  ) {}

  /**
   * A v, a new Float64Array of `size` entries (zeros when J v or J^T J v is 0 at every scale).
   *
   * @throws NonFiniteError when a product is not finite at any scale of its direction.
   */
  apply(v: Float64Array): Float64Array {
    const { map, size } = this;
    this.count++;
    const w = scaledProduct(
      (c) => product((t) => map.jvp(t), v, c, map.inShape),
      this.tangentExponent,
      "Df v",
    );
    this.tangentExponent = w.exponent;
    if (w.values === null) return new Float64Array(size); // Df v = 0 at every scale
    // The cotangent Df v, normalised to a largest entry of about 1 (exact: a power of two).
    const norm = -Math.round(Math.log2(maxAbs(w.values)));
    const unit = 2 ** norm;
    const u = new Float64Array(w.values.length);
    for (let i = 0; i < u.length; i++) u[i] = w.values[i] * unit;
    const y = scaledProduct(
      (c) => product((t) => map.vjp(t), u, c, map.outShape),
      this.cotangentExponent,
      "Df^T Df v",
    );
    this.cotangentExponent = y.exponent;
    const out = new Float64Array(size);
    if (y.values === null) return out;
    const undo = -(w.exponent + norm + y.exponent);
    // Two factors: 2^undo alone may leave float64's range although the result does not.
    const half = Math.trunc(undo / 2);
    const f1 = 2 ** half;
    const f2 = 2 ** (undo - half);
    for (let i = 0; i < size; i++) out[i] = y.values[i] * f1 * f2;
    return out;
  }
}
