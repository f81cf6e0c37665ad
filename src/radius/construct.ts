import type { NamedArray } from "../nn/params.ts";
import { symEigen } from "../lipschitz/linalg.ts";

/**
 * Inputs that make an attention head's local Lipschitz constant grow, after Castin, Ablin and
 * Peyre, "How Smooth Is Attention?" (ICML 2024), Section 3: the local constant over the ball of
 * token norm R grows like sqrt(n) R^2 and the bound is attained (up to constants) for sequence
 * lengths up to about exp(lambda R^2), lambda > 0 an eigenvalue of the symmetric part of the
 * query-key matrix; beyond that (the mean-field regime) it no longer grows with n. The
 * mechanism: one token receives a fixed share of every other token's attention while both the
 * queries and the value gap stay of size R, so moving that one token moves all n - 1 outputs
 * by about R^2 each.
 *
 * The construction here (attnlip's reading of that section: which tokens, how they are tuned):
 * per head h, with A = W_Q W_K^T / sqrt(d_k) (d x d), beta = b_Q W_K^T / sqrt(d_k), S = (A + A^T)/2,
 * u the unit top eigenvector of S (eigenvalue lambda) and w a unit eigenvector of S orthogonal to
 * u (the smallest eigenvalue's):
 *   x_1 = R u (the token the others attend to), x_2 = ... = x_n = a u + c w, a^2 + c^2 <= R^2,
 * so that every token has norm at most R and x_1 has norm exactly R. The score gap of row i
 * between key 1 and its own group, g = x_i A (x_1 - x_i)^T + beta (x_1 - x_i)^T, is a quadratic
 * in c for each a; (a, c) maximise the key path's size per row,
 *   p (1 - p) ||x_i A + beta|| ||x_1 - x_i||,  p = 1 / (1 + (n - 1) e^(-g))
 * (the share of key 1 in row i; p = 1/2 at g = log(n - 1)), over 41 values of a in [-R, R] and,
 * for each, the c that bring g nearest log(n - 1) or end the range.
 */

/** One head's constructed tokens and what they were built from. */
export interface ConstructedInput {
  head: number;
  /** Tokens X [n, d] row-major. */
  x: Float64Array;
  /** Top eigenvalue of the symmetric part of A (score per squared norm along u). */
  lambda: number;
  /** Share of token 1 in each other row's attention, predicted from the construction (NaN for n = 1). */
  share: number;
}

/** Columns h d_k .. (h + 1) d_k - 1 of a [d, d] matrix, as [d, d_k]. */
function headColumns(w: NamedArray, h: number, dk: number): Float64Array {
  const d = w.shape[0];
  const cols = w.shape[1];
  const out = new Float64Array(d * dk);
  for (let i = 0; i < d; i++)
    for (let j = 0; j < dk; j++) out[i * dk + j] = w.data[i * cols + h * dk + j];
  return out;
}

/** [d, dk] times [d, dk]^T -> [d, d] over sqrt(dk). */
function queryKey(wq: Float64Array, wk: Float64Array, d: number, dk: number): Float64Array {
  const a = new Float64Array(d * d);
  const s = 1 / Math.sqrt(dk);
  for (let i = 0; i < d; i++)
    for (let j = 0; j < d; j++) {
      let t = 0;
      for (let k = 0; k < dk; k++) t += wq[i * dk + k] * wk[j * dk + k];
      a[i * d + j] = t * s;
    }
  return a;
}

const dot = (x: ArrayLike<number>, y: ArrayLike<number>) => {
  let s = 0;
  for (let i = 0; i < x.length; i++) s += x[i] * y[i];
  return s;
};

/** y = x A (x a row vector). */
function rowTimes(x: ArrayLike<number>, a: Float64Array, d: number): Float64Array {
  const out = new Float64Array(d);
  for (let i = 0; i < d; i++) for (let j = 0; j < d; j++) out[j] += x[i] * a[i * d + j];
  return out;
}

/**
 * The constructed input of every head of an attention layer at radius R and length n.
 *
 * @param params the layer's weights by role: wq, wk [d, d] (columns per head), optional bq [d];
 *   a kind without wk (tied query and key) uses wq for both.
 * @param heads number of heads H (d divisible by H).
 * @returns one {@link ConstructedInput} per head, in head order.
 * @throws RangeError when wq is missing, shapes disagree, n < 1 or R is not finite and > 0.
 * @example constructedInputs({ wq, wk }, 2, 17, 10)[0].x // [17, d], largest token norm 10
 */
export function constructedInputs(
  params: Readonly<Record<string, NamedArray>>,
  heads: number,
  n: number,
  radius: number,
): ConstructedInput[] {
  const wq = params.wq;
  if (wq === undefined)
    throw new RangeError("constructedInputs: the layer has no query weights (role wq)");
  const wk = params.wk ?? wq;
  const [d, width] = wq.shape;
  if (wk.shape[0] !== d || wk.shape[1] !== width)
    throw new RangeError("constructedInputs: wq and wk shapes differ");
  if (!Number.isInteger(heads) || heads < 1 || width % heads !== 0)
    throw new RangeError(`constructedInputs: ${width} columns do not split into ${heads} heads`);
  if (!Number.isInteger(n) || n < 1)
    throw new RangeError(`constructedInputs: n must be a positive integer, got ${n}`);
  if (!(radius > 0) || !Number.isFinite(radius))
    throw new RangeError(`constructedInputs: radius must be finite and > 0, got ${radius}`);
  const dk = width / heads;
  const out: ConstructedInput[] = [];
  for (let h = 0; h < heads; h++) {
    const q = headColumns(wq, h, dk);
    const k = headColumns(wk, h, dk);
    const a = queryKey(q, k, d, dk);
    const beta = new Float64Array(d);
    if (params.bq !== undefined) {
      const bq = params.bq.data;
      const s = 1 / Math.sqrt(dk);
      for (let i = 0; i < d; i++)
        for (let c = 0; c < dk; c++) beta[i] += bq[h * dk + c] * k[i * dk + c] * s;
    }
    const wv =
      params.wv === undefined ? null : headColumns(params.wv, h, params.wv.shape[1] / heads);
    out.push({
      head: h,
      ...headInput(a, beta, wv, d, wv === null ? 0 : params.wv.shape[1] / heads, n, radius),
    });
  }
  return out;
}

/** The construction for one head (see the module comment). */
function headInput(
  a: Float64Array,
  beta: Float64Array,
  wv: Float64Array | null,
  d: number,
  dv: number,
  n: number,
  radius: number,
): Omit<ConstructedInput, "head"> {
  const sym = new Float64Array(d * d);
  for (let i = 0; i < d; i++)
    for (let j = 0; j < d; j++) sym[i * d + j] = (a[i * d + j] + a[j * d + i]) / 2;
  const { values, vectors } = symEigen(sym, d);
  let top = 0;
  for (let i = 1; i < d; i++) if (values[i] > values[top]) top = i;
  const column = (c: number) => Float64Array.from({ length: d }, (_, i) => vectors[i * d + c]);
  const u = column(top);
  if (dot(beta, u) < 0) for (let i = 0; i < d; i++) u[i] = -u[i];
  const lambda = values[top];
  const x = new Float64Array(n * d);
  for (let i = 0; i < d; i++) x[i] = radius * u[i];
  if (n === 1) return { x, lambda, share: NaN };

  const target = Math.log(n - 1);
  // The value gap's size ||(x_1 - x_i) W_V|| (||x_1 - x_i|| when the kind has no W_V).
  const valueGap = (diff: Float64Array) => {
    if (wv === null) return Math.hypot(...diff);
    let s = 0;
    for (let j = 0; j < dv; j++) {
      let t = 0;
      for (let i = 0; i < d; i++) t += diff[i] * wv[i * dv + j];
      s += t * t;
    }
    return Math.sqrt(s);
  };
  let best = { s: 0, c: 0, w: new Float64Array(d), value: -1, z: 0 };
  // w: each other eigenvector of S in turn (none when d = 1).
  for (let col = 0; col < d; col++) {
    if (col === top) continue;
    const w = column(col);
    const uA = rowTimes(u, a, d);
    const wA = rowTimes(w, a, d);
    const [uAu, uAw, wAu, wAw] = [dot(uA, u), dot(uA, w), dot(wA, u), dot(wA, w)];
    const [bu, bw] = [dot(beta, u), dot(beta, w)];
    // g(s, c) for x_i = s u + c w (s is the "a" of the module comment): quadratic in c.
    const gap = (s: number, c: number) =>
      radius * (s * uAu + c * wAu) -
      (s * s * uAu + s * c * (uAw + wAu) + c * c * wAw) +
      (radius - s) * bu -
      c * bw;
    const score = (s: number, c: number) => {
      const z = gap(s, c) - target;
      // p (1 - p) with p = 1 / (1 + (n - 1) e^-g) = 1 / (1 + e^-z), stably.
      const pq = Math.exp(-Math.abs(z)) / (1 + Math.exp(-Math.abs(z))) ** 2;
      const query = Math.hypot(
        ...Array.from({ length: d }, (_, j) => s * uA[j] + c * wA[j] + beta[j]),
      );
      const diff = Float64Array.from({ length: d }, (_, j) => (radius - s) * u[j] - c * w[j]);
      return { value: pq * query * valueGap(diff), z };
    };
    for (let step = 0; step <= 40; step++) {
      const s = radius * (-1 + step / 20);
      const cMax = Math.sqrt(Math.max(radius * radius - s * s, 0));
      const q0 = gap(s, 0);
      const q2 = -wAw;
      const q1 = gap(s, 1) - q0 - q2;
      const candidates = [0, cMax, -cMax];
      if (q2 !== 0) {
        candidates.push(-q1 / (2 * q2));
        const disc = q1 * q1 - 4 * q2 * (q0 - target);
        if (disc >= 0)
          candidates.push((-q1 + Math.sqrt(disc)) / (2 * q2), (-q1 - Math.sqrt(disc)) / (2 * q2));
      } else if (q1 !== 0) candidates.push((target - q0) / q1);
      for (const c0 of candidates) {
        const c = Math.max(-cMax, Math.min(cMax, c0));
        const r = score(s, c);
        if (r.value > best.value) best = { s, c, w, value: r.value, z: r.z };
      }
    }
  }
  for (let t = 1; t < n; t++)
    for (let i = 0; i < d; i++) x[t * d + i] = best.s * u[i] + best.c * best.w[i];
  return { x, lambda, share: d > 1 ? 1 / (1 + Math.exp(-best.z)) : NaN };
}
