import { spectralNorm } from "../linalg.ts";

/**
 * Embedding factors (docs/math.md section 3, network composition).
 */

/**
 * ViT patch embedding: patches are disjoint blocks of pixels (a permutation of the image
 * entries), each mapped by the same W [p*p*c, d] plus a constant (bias, CLS row and position
 * embeddings), so the Jacobian is block diagonal with blocks W (and a zero CLS row):
 * its norm is exactly ||W||_2.
 *
 * @param w patch.w [patchDim, d] row-major. @returns ||W||_2.
 * @throws RangeError on a size mismatch or non-finite entries.
 */
export function patchEmbeddingBound(w: ArrayLike<number>, patchDim: number, d: number): number {
  if (w.length !== patchDim * d)
    throw new RangeError(`patch embedding: W must be [${patchDim}, ${d}]`);
  return spectralNorm(w, patchDim, d);
}

/**
 * Text token embedding: the network is bounded as a function of the embedded sequence (token
 * embeddings + positions, trace.embedding), since token ids are discrete; the factor of that
 * identity map is exactly 1.
 *
 * @returns 1.
 */
export function tokenEmbeddingBound(): number {
  return 1;
}
