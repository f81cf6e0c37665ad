/**
 * The radius sweep's grids and input transforms (plain arrays, float64): the default radius
 * grid, the rescaling to a radius, and the token subsets of the length sweep.
 */

/**
 * How a sequence's radius is measured: its largest token norm R = max_i ||x_i||_2, the radius
 * of the ball B_R that Castin et al.'s bound and the `castin` variant are stated over.
 */
export const RADIUS_MEASURE = "maxTokenNorm";

/**
 * The default radii: 13 points, log-spaced, 0.1 to 1000 (three per decade: 0.1, 0.215, 0.464, 1, ...).
 *
 * @example defaultRadii()[3] // 1
 */
export function defaultRadii(): number[] {
  return Array.from({ length: 13 }, (_, k) => Number((10 ** (-1 + k / 3)).toPrecision(3)));
}

/**
 * The largest token norm of X [m, d] row-major.
 *
 * @example maxTokenNorm([3, 4, 0, 1], 2, 2) // 5
 */
export function maxTokenNorm(x: ArrayLike<number>, m: number, d: number): number {
  let best = 0;
  for (let i = 0; i < m; i++) {
    let s = 0;
    for (let a = 0; a < d; a++) s += x[i * d + a] ** 2;
    best = Math.max(best, s);
  }
  return Math.sqrt(best);
}

/**
 * X scaled by one factor so that its largest token norm is `radius` (directions and relative
 * token norms kept).
 *
 * @returns a new Float64Array [m, d].
 * @throws RangeError when radius is not finite and > 0, or X is all zeros.
 * @example scaleToRadius([3, 4, 0, 1], 2, 2, 10) // [6, 8, 0, 2]
 */
export function scaleToRadius(
  x: ArrayLike<number>,
  m: number,
  d: number,
  radius: number,
): Float64Array {
  if (!(radius > 0) || !Number.isFinite(radius))
    throw new RangeError(`scaleToRadius: radius must be finite and > 0, got ${radius}`);
  const r = maxTokenNorm(x, m, d);
  if (!(r > 0))
    throw new RangeError("scaleToRadius: every token is zero, so no scaling reaches a radius");
  const out = new Float64Array(m * d);
  for (let i = 0; i < m * d; i++) out[i] = (x[i] * radius) / r;
  return out;
}

/**
 * Which of `available` token positions (in order) a length-`n` subset keeps: the first one (a
 * ViT's class token, a text's first token) and n - 1 others evenly spaced over the rest, in
 * order (so causal masks stay causal).
 *
 * @returns n positions, increasing.
 * @throws RangeError when n < 1 or n > available.length.
 * @example evenlySpaced([0, 1, 2, 3, 4, 5, 6, 7, 8], 3) // [0, 1, 8]
 */
export function evenlySpaced(available: readonly number[], n: number): number[] {
  const r = available.length;
  if (!Number.isInteger(n) || n < 1 || n > r)
    throw new RangeError(`evenlySpaced: n must be an integer from 1 to ${r}, got ${n}`);
  if (n === 1) return [available[0]];
  const rest = r - 1;
  const picks = [available[0]];
  for (let k = 0; k < n - 1; k++)
    picks.push(available[1 + (n === 2 ? 0 : Math.round((k * (rest - 1)) / (n - 2)))]);
  return picks;
}

/**
 * Rows `rows` of X [m, d] and the allowed-keys mask restricted to them.
 *
 * @example selectTokens(x, 16, [0, 4], null) // {x: rows 0 and 4, allowed: null}
 */
export function selectTokens(
  x: ArrayLike<number>,
  d: number,
  rows: readonly number[],
  allowed: { data: Uint8Array; n: number } | null,
): { x: Float64Array; allowed: Uint8Array | null } {
  const m = rows.length;
  const out = new Float64Array(m * d);
  rows.forEach((row, i) => {
    for (let a = 0; a < d; a++) out[i * d + a] = x[row * d + a];
  });
  if (allowed === null) return { x: out, allowed: null };
  const mask = new Uint8Array(m * m);
  rows.forEach((ri, i) =>
    rows.forEach((rj, j) => (mask[i * m + j] = allowed.data[ri * allowed.n + rj])),
  );
  return { x: out, allowed: mask };
}

/**
 * The least-squares slope of log y against log x over the points with x, y > 0 (NaN with fewer
 * than two such points or one x only): the growth exponent of y in x.
 *
 * @example logLogSlope([1, 10, 100], [2, 200, 20000]) // 2
 */
export function logLogSlope(x: readonly number[], y: readonly number[]): number {
  const pts = x
    .map((xi, i) => [xi, y[i]])
    .filter(([a, b]) => a > 0 && b > 0 && Number.isFinite(a) && Number.isFinite(b));
  if (pts.length < 2) return NaN;
  const lx = pts.map(([a]) => Math.log(a));
  const ly = pts.map(([, b]) => Math.log(b));
  const mx = lx.reduce((s, v) => s + v, 0) / lx.length;
  const my = ly.reduce((s, v) => s + v, 0) / ly.length;
  let sxy = 0;
  let sxx = 0;
  lx.forEach((v, i) => {
    sxy += (v - mx) * (ly[i] - my);
    sxx += (v - mx) ** 2;
  });
  return sxx === 0 ? NaN : sxy / sxx;
}
