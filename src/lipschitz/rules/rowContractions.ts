import { rowDots } from "../linalg.ts";

/**
 * The O(n^2 d_k^2) contractions of the `cov` and `fused` head paths (docs/math.md section 2),
 * as blocked float64 loops: every row of P (or of a weight matrix of the same shape) against the
 * same n stacked d_k x d_k matrices. Hand-written, as linalg.ts is, because tfjs has no float64
 * and these sums feed eigenvalues that must stay upper bounds; a float32 GEMM would need its
 * own rounding margin (docs/performance.md, "Real size").
 *
 * Symmetric d_k x d_k matrices are stored packed: the upper triangle, row by row, T = d_k (d_k + 1) / 2
 * entries, entry (a, b) with a <= b at {@link packedIndex}(a, b, d_k). Half the work of the full
 * matrices, and the same sums entry by entry.
 */

/** Entries of a packed symmetric d_k x d_k matrix. @example packedSize(64) // 2080 */
export function packedSize(dk: number): number {
  return (dk * (dk + 1)) / 2;
}

/**
 * Position of entry (a, b), a <= b, in a packed symmetric matrix of size dk.
 *
 * @example packedIndex(0, 1, 3) // 1; packedIndex(1, 1, 3) // 3
 */
export function packedIndex(a: number, b: number, dk: number): number {
  return a * dk - (a * (a - 1)) / 2 + (b - a);
}

/**
 * The packed outer products x_j x_j^T of the rows of x [n, dk] whose `keep[j]` is set (zero
 * rows elsewhere): [n, T].
 *
 * @example packedOuters(Float64Array.of(1, 2), 1, 2) // [1, 2, 4]
 */
export function packedOuters(
  x: Float64Array,
  n: number,
  dk: number,
  keep?: Uint8Array,
): Float64Array {
  const t = packedSize(dk);
  const out = new Float64Array(n * t);
  for (let j = 0; j < n; j++) {
    if (keep !== undefined && !keep[j]) continue;
    let o = j * t;
    for (let a = 0; a < dk; a++) {
      const xa = x[j * dk + a];
      for (let b = a; b < dk; b++) out[o++] = xa * x[j * dk + b];
    }
  }
  return out;
}

/**
 * A packed symmetric matrix [T] unpacked into the full row-major [dk, dk] `out`.
 *
 * @example unpackSymmetric(Float64Array.of(1, 2, 4), 2, new Float64Array(4)) // [1, 2, 2, 4]
 */
export function unpackSymmetric(
  packed: ArrayLike<number>,
  dk: number,
  out: Float64Array,
): Float64Array {
  let o = 0;
  for (let a = 0; a < dk; a++)
    for (let b = a; b < dk; b++) {
      const v = packed[o++];
      out[a * dk + b] = v;
      out[b * dk + a] = v;
    }
  return out;
}

/** z [n, width] row-major transposed to [width, n]. */
function transposed(z: Float64Array, n: number, width: number): Float64Array {
  const zt = new Float64Array(n * width);
  for (let j = 0; j < n; j++) {
    const o = j * width;
    for (let t = 0; t < width; t++) zt[t * n + j] = z[o + t];
  }
  return zt;
}

/** One past the last nonzero of w[i .. i + n) (0 when all are zero). */
function nonzeroEnd(w: Float64Array, i: number, n: number): number {
  let end = n;
  while (end > 0 && w[i + end - 1] === 0) end--;
  return end;
}

/**
 * One row's plain sums, the tail of {@link weightedRowSums}: out[o + t] = sum_{j < end}
 * w[i + j] zt[t n + j] for the columns t in [from, width), j in increasing order.
 */
function rowSums(
  w: Float64Array,
  i: number,
  zt: Float64Array,
  n: number,
  end: number,
  out: Float64Array,
  o: number,
  from: number,
  width: number,
): void {
  for (let t = from; t < width; t++) {
    const b = t * n;
    let acc = 0;
    for (let j = 0; j < end; j++) acc += w[i + j] * zt[b + j];
    out[o + t] = acc;
  }
}

/**
 * Row r of the result [rows.length, width] is sum_j w[rows[r], j] z_j over j = 0..n-1 in
 * increasing order (w [*, n] row-major, z [n, width]): W Z for the listed rows. Blocked as a
 * GEMM: z is transposed once, and each 4 x 4 tile of the result (four rows, four columns) is
 * summed over j in registers, so each loaded weight and z entry serves four products (about 3x
 * the row-at-a-time loop on ViT-B/16's heads: 197 x 197 weights against 197 x 4096). Every
 * entry is still the plain sum over j in increasing order, bit for bit; zero weights add +-0,
 * which changes no sum that starts at +0, and the j range of a tile stops at its rows' last
 * nonzero weight (a causal mask's zeros cost nothing).
 *
 * @example weightedRowSums([0], 2, 1, Float64Array.of(2, 3), Float64Array.of(1, 10)) // [32]
 */
export function weightedRowSums(
  rows: readonly number[],
  n: number,
  width: number,
  w: Float64Array,
  z: Float64Array,
): Float64Array {
  const zt = transposed(z, n, width);
  const out = new Float64Array(rows.length * width);
  const single = (r: number, from: number, end: number) =>
    rowSums(w, rows[r] * n, zt, n, end, out, r * width, from, width);
  const lastNonzero = (r: number) => nonzeroEnd(w, rows[r] * n, n);
  let r = 0;
  for (; r + 3 < rows.length; r += 4) {
    const i0 = rows[r] * n;
    const i1 = rows[r + 1] * n;
    const i2 = rows[r + 2] * n;
    const i3 = rows[r + 3] * n;
    const o0 = r * width;
    const o1 = o0 + width;
    const o2 = o1 + width;
    const o3 = o2 + width;
    const end = Math.max(
      lastNonzero(r),
      lastNonzero(r + 1),
      lastNonzero(r + 2),
      lastNonzero(r + 3),
    );
    let t = 0;
    for (; t + 3 < width; t += 4) {
      const b0 = t * n;
      const b1 = b0 + n;
      const b2 = b1 + n;
      const b3 = b2 + n;
      let a00 = 0, a01 = 0, a02 = 0, a03 = 0, a10 = 0, a11 = 0, a12 = 0, a13 = 0; // prettier-ignore
      let a20 = 0, a21 = 0, a22 = 0, a23 = 0, a30 = 0, a31 = 0, a32 = 0, a33 = 0; // prettier-ignore
      for (let j = 0; j < end; j++) {
        const w0 = w[i0 + j];
        const w1 = w[i1 + j];
        const w2 = w[i2 + j];
        const w3 = w[i3 + j];
        const z0 = zt[b0 + j];
        const z1 = zt[b1 + j];
        const z2 = zt[b2 + j];
        const z3 = zt[b3 + j];
        a00 += w0 * z0;
        a01 += w0 * z1;
        a02 += w0 * z2;
        a03 += w0 * z3; // prettier-ignore
        a10 += w1 * z0;
        a11 += w1 * z1;
        a12 += w1 * z2;
        a13 += w1 * z3; // prettier-ignore
        a20 += w2 * z0;
        a21 += w2 * z1;
        a22 += w2 * z2;
        a23 += w2 * z3; // prettier-ignore
        a30 += w3 * z0;
        a31 += w3 * z1;
        a32 += w3 * z2;
        a33 += w3 * z3; // prettier-ignore
      }
      out[o0 + t] = a00;
      out[o0 + t + 1] = a01;
      out[o0 + t + 2] = a02;
      out[o0 + t + 3] = a03; // prettier-ignore
      out[o1 + t] = a10;
      out[o1 + t + 1] = a11;
      out[o1 + t + 2] = a12;
      out[o1 + t + 3] = a13; // prettier-ignore
      out[o2 + t] = a20;
      out[o2 + t + 1] = a21;
      out[o2 + t + 2] = a22;
      out[o2 + t + 3] = a23; // prettier-ignore
      out[o3 + t] = a30;
      out[o3 + t + 1] = a31;
      out[o3 + t + 2] = a32;
      out[o3 + t + 3] = a33; // prettier-ignore
    }
    for (let k = 0; k < 4; k++) single(r + k, t, end);
  }
  for (; r < rows.length; r++) single(r, 0, lastNonzero(r));
  return out;
}

/**
 * The quadratic forms x_i S_j x_i^T for every row x_i of x [n, dk] and every packed symmetric
 * S_j of s [m, T]: [n, m] row-major, as dot products of packed vectors (x_i x_i^T packed with
 * its off-diagonal entries doubled, against S_j: linalg.ts rowDots).
 *
 * @example packedQuadraticForms(Float64Array.of(1, 2), 1, 2, Float64Array.of(1, 0, 1), 1) // [5]
 */
export function packedQuadraticForms(
  x: Float64Array,
  n: number,
  dk: number,
  s: Float64Array,
  m: number,
): Float64Array {
  const t = packedSize(dk);
  const xx = new Float64Array(n * t);
  for (let i = 0; i < n; i++) {
    let o = i * t;
    for (let a = 0; a < dk; a++) {
      const xa = x[i * dk + a];
      xx[o++] = xa * xa;
      for (let b = a + 1; b < dk; b++) xx[o++] = 2 * xa * x[i * dk + b];
    }
  }
  return rowDots(xx, n, s, m, t);
}

/**
 * Packs symmetric row-major [dk, dk] matrices stacked in full [m, dk, dk] (upper triangle read).
 *
 * @example packSymmetric(Float64Array.of(1, 2, 2, 4), 1, 2) // [1, 2, 4]
 */
export function packSymmetric(full: Float64Array, m: number, dk: number): Float64Array {
  const t = packedSize(dk);
  const out = new Float64Array(m * t);
  for (let j = 0; j < m; j++) {
    let o = j * t;
    const base = j * dk * dk;
    for (let a = 0; a < dk; a++) for (let b = a; b < dk; b++) out[o++] = full[base + a * dk + b];
  }
  return out;
}
