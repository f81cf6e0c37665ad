import { inRegistryOrder } from "../variants/index.ts";
import type { VariantValues } from "./headTypes.ts";

/**
 * Multi-head composition (docs/math.md section 3): f(X) = [f_1(X), ..., f_H(X)] W_O + b_O has
 * ||Df(X)||_2 <= ||W_O||_2 (sum_h L_h^2)^(1/2), since the stacked head Jacobians map E to the
 * concatenation, whose Frobenius norm squared is the sum over heads.
 *
 * @param heads one {@link VariantValues} per head (each a bound on that head's ||Df_h(X)||_2).
 * @param normWo ||W_O||_2 (W_O [d, d]), >= 0.
 * @returns the layer bound per variant.
 * @throws RangeError when there is no head or normWo is negative or not finite.
 */
export function attentionLayerBound(
  heads: readonly VariantValues[],
  normWo: number,
): VariantValues {
  if (heads.length === 0) throw new RangeError("attention layer: no heads");
  if (!(normWo >= 0) || !Number.isFinite(normWo))
    throw new RangeError(`attention layer: ||W_O||_2 must be finite and >= 0, got ${normWo}`);
  const out = {} as VariantValues;
  // The variants the heads hold (all, or the subset that was asked for).
  for (const name of inRegistryOrder(Object.keys(heads[0]))) {
    let s = 0;
    for (const h of heads) s += h[name] * h[name];
    out[name] = normWo * Math.sqrt(s);
  }
  return out;
}
