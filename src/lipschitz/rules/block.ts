import { inRegistryOrder } from "../variants/index.ts";
import type { VariantValues } from "./headTypes.ts";

/**
 * Residual and block composition (docs/math.md section 3).
 */

/**
 * Residual connection x + g(x): ||D(x + g)|| <= 1 + L_g.
 *
 * @param inner a bound L_g >= 0 on the branch. @returns 1 + L_g.
 * @throws RangeError when inner is negative or not a number.
 */
export function residualBound(inner: number): number {
  if (!(inner >= 0)) throw new RangeError(`residual: branch bound must be >= 0, got ${inner}`);
  return 1 + inner;
}

/** A block's sub-layer bounds, each evaluated at that sub-layer's own input. */
export interface BlockParts {
  /** "pre": x + attn(LN1(x)), then y + mlp(LN2(y)); "post": LN1(x + attn(x)), then LN2(y + mlp(y)). */
  norm: "pre" | "post";
  /** Attention layer bound per variant. */
  attention: VariantValues;
  /** LayerNorm factors (max over rows). */
  ln1: number;
  ln2: number;
  /** MLP bound used in the block (the local one, or the relaxed one). */
  mlp: number;
}

/**
 * A block's bound per variant:
 * pre-LN (1 + L_attn L_LN1)(1 + L_mlp L_LN2); post-LN L_LN1 (1 + L_attn) L_LN2 (1 + L_mlp)
 * (the LN factors multiply after the residual).
 *
 * @returns a value per head variant.
 * @throws RangeError on a negative or NaN part.
 */
export function blockBound(parts: BlockParts): VariantValues {
  const { ln1, ln2, mlp } = parts;
  for (const [name, v] of [
    ["ln1", ln1],
    ["ln2", ln2],
    ["mlp", mlp],
  ] as const)
    if (!(v >= 0)) throw new RangeError(`block: ${name} bound must be >= 0, got ${v}`);
  const out = {} as VariantValues;
  // The variants the attention bound holds (all, or the subset that was asked for).
  for (const name of inRegistryOrder(Object.keys(parts.attention))) {
    const a = parts.attention[name];
    out[name] =
      parts.norm === "pre"
        ? residualBound(a * ln1) * residualBound(mlp * ln2)
        : ln1 * residualBound(a) * ln2 * residualBound(mlp);
  }
  return out;
}
