import { lambertW0 } from "./lambertW.ts";

/**
 * Kim, Papamakarios and Mnih's global l_2 bound of L2 multi-head self-attention (ICML 2021,
 * Theorem 3.2; docs/math.md section 2, "L2 self-attention", variant `kim`):
 *
 *   Lip_2(F) <= (sqrt(N) / sqrt(D/H)) (4 phi^{-1}(N - 1) + 1)
 *               sqrt(sum_h ||W^{Q,h}||_2^2 ||W^{V,h}||_2^2) ||W^O||_2,
 *   phi(x) = x e^{x + 1},  so phi^{-1}(N - 1) = W_0((N - 1) / e)  (Lambert W, lambertW.ts),
 *
 * for F(X) = [P^1 X A^1 W^{V,1}, ..., P^H X A^H W^{V,H}] W^O on X in R^{N x D}, A^h =
 * W^{Q,h} W^{Q,h}^T / sqrt(D/H) (src/nn/l2Attention.ts). It holds for EVERY input X (a global
 * Lipschitz constant, not a local value at one X), for unmasked attention.
 *
 * Per head, {@link kimHeadBound} is the head map's share, K_h = c_N ||W^{Q,h}||^2 ||W^{V,h}|| /
 * sqrt(d_k) with c_N = sqrt(N) (4 phi^{-1}(N - 1) + 1); the layer bound ||W^O|| (sum_h K_h^2)^(1/2)
 * is then attentionLayerBound's composition of the heads (rules/attentionLayer.ts).
 */

/**
 * phi^{-1}(N - 1) of Kim et al.'s Theorem 3.2, phi(x) = x e^{x+1}: the x >= 0 with
 * x e^{x+1} = N - 1, i.e. W_0((N - 1) / e).
 *
 * @param n sequence length N >= 1.
 * @returns phi^{-1}(N - 1) >= 0 (0 for N = 1; about log N - log log N for large N).
 * @throws RangeError naming `n` when it is not an integer >= 1.
 * @example kimPhiInverse(1 + Math.E) // 1 (1 * e^2 = e = N - 1)
 */
export function kimPhiInverse(n: number): number {
  if (!(n >= 1) || !Number.isFinite(n))
    throw new RangeError(`kimPhiInverse: n must be >= 1, got ${n}`);
  return lambertW0((n - 1) / Math.E);
}

/**
 * One head's share of Kim et al.'s Theorem 3.2 bound: a global Lipschitz constant of the head
 * map X -> P^h X A^h W^{V,h} (+ a constant bias), l_2 norms of X [N, D] and of the output:
 *   (sqrt(N) / sqrt(d_k)) (4 phi^{-1}(N - 1) + 1) ||W^{Q,h}||_2^2 ||W^{V,h}||_2.
 *
 * @param n sequence length N >= 1.
 * @param dk head width d_k = D / H >= 1.
 * @param normWq ||W^{Q,h}||_2 (W^{Q,h} [D, d_k]), finite and >= 0.
 * @param normWv ||W^{V,h}||_2 (W^{V,h} [D, d_k]), finite and >= 0.
 * @returns the bound (>= 0).
 * @throws RangeError naming the argument that is out of range.
 * @example kimHeadBound(1, 4, 1, 1) // 0.5: one token, f = x A W_V with ||A|| = 1/2
 */
export function kimHeadBound(n: number, dk: number, normWq: number, normWv: number): number {
  if (!(dk >= 1) || !Number.isFinite(dk))
    throw new RangeError(`kimHeadBound: dk must be >= 1, got ${dk}`);
  for (const [name, v] of [
    ["normWq", normWq],
    ["normWv", normWv],
  ] as const)
    if (!(v >= 0) || !Number.isFinite(v))
      throw new RangeError(`kimHeadBound: ${name} must be finite and >= 0, got ${v}`);
  return (Math.sqrt(n) / Math.sqrt(dk)) * (4 * kimPhiInverse(n) + 1) * normWq * normWq * normWv;
}
