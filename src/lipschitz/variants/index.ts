import { CASTIN_VARIANT } from "./castin.ts";
import { FUSED_VARIANT } from "./fused.ts";
import { KIM_VARIANT } from "./kim.ts";
import { L2_DIST_COV_VARIANTS } from "./l2Local.ts";
import { PAPER_VARIANT } from "./paper.ts";
import { registerBoundVariant, variantNames, type BoundVariantSpec } from "./registry.ts";
import { ROW_RESOLVED_VARIANTS } from "./rowResolved.ts";
import { T3_VARIANTS } from "./t3.ts";

/**
 * The built-in bound variants, registered in docs/math.md section 2's order (the order of every
 * list, analysis.json's `variants` and the tables): one family per file, one line each here.
 * Import the registry from this file, so that the built-ins are registered first.
 */
const BUILTIN_VARIANTS: readonly BoundVariantSpec[] = [
  PAPER_VARIANT,
  ...T3_VARIANTS,
  ...ROW_RESOLVED_VARIANTS,
  FUSED_VARIANT,
  CASTIN_VARIANT,
  ...L2_DIST_COV_VARIANTS,
  KIM_VARIANT,
];
for (const spec of BUILTIN_VARIANTS) registerBoundVariant(spec);

/**
 * The built-in variants of dot-product attention, in order (the registry's list at load;
 * variantNames("dot") includes variants registered since).
 */
export const HEAD_VARIANTS: readonly string[] = variantNames("dot");

/** The built-in variants of L2 attention: `l2-dist`, `l2-cov` (local) and `kim` (global). */
export const L2_VARIANTS: readonly string[] = variantNames("l2");

/** The built-in local variants of L2 attention: `l2-dist`, `l2-cov`. */
export const L2_LOCAL_VARIANTS: readonly string[] = L2_DIST_COV_VARIANTS.map((v) => v.name);

/** Every built-in variant: {@link HEAD_VARIANTS} and {@link L2_VARIANTS}. */
export const ALL_VARIANTS: readonly string[] = variantNames();

export * from "./registry.ts";
export { KIM_DOT_REFUSED } from "./kim.ts";
export { L2_LOCAL_DOT_REFUSED } from "./l2Local.ts";
export { FUSED } from "./fused.ts";
