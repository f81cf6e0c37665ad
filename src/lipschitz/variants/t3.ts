import type { DotBoundVariant, DotHeadQuantities } from "./registry.ts";

/**
 * The `t3-*` variants (docs/math.md section 2): the paper's Theorem-3 structure with centred keys
 * and values, L_T3(s) = ||P|| ||W_V|| + s (||W_Q K_c^T|| + ||Q W_K^T||) ||V_c|| / sqrt(d_k), with s
 * the softmax Jacobian's norm bounded by 1 or 1/2 (prior art), or each row's sigma_top2,
 * sigma_quad or exact sigma at its largest (distribution-aware). Without a live row s = 0.
 */
function t3(q: DotHeadQuantities, s: number): number {
  return q.valuePath + (s * (q.wqKc + q.qWk) * q.vc) / Math.sqrt(q.dk);
}

/** One `t3-*` record: its name, family, note, colour and its s. */
function t3Variant(
  name: string,
  family: DotBoundVariant["family"],
  note: string,
  colour: string,
  s: (q: DotHeadQuantities) => number,
  summary = false,
): DotBoundVariant {
  return {
    name,
    kind: "dot",
    family,
    note,
    math: "2. One attention head",
    colour,
    summary,
    needs: [],
    compute: (q) => t3(q, s(q)),
  };
}

/** `t3-one`, `t3-half`, `t3-top2`, `t3-quad`, `t3-exact`, loosest first. */
export const T3_VARIANTS: DotBoundVariant[] = [
  t3Variant(
    "t3-one",
    "prior art",
    "prior art: softmax Jacobian norm bounded by 1",
    "#f58518",
    (q) => (q.anyLive ? 1 : 0),
  ),
  t3Variant(
    "t3-half",
    "prior art",
    "prior art: softmax Jacobian norm bounded by 1/2 (the global worst case)",
    "#e45756",
    (q) => (q.anyLive ? 0.5 : 0),
    true,
  ),
  t3Variant(
    "t3-top2",
    "distribution-aware",
    "distribution-aware: each row's closed form p(1)(1 - p(1) + p(2))",
    "#72b7b2",
    (q) => q.sMax.top2,
  ),
  t3Variant(
    "t3-quad",
    "distribution-aware",
    "distribution-aware: each row's quadratic closed form (tighter than top2)",
    "#54a24b",
    (q) => q.sMax.quad,
  ),
  t3Variant(
    "t3-exact",
    "distribution-aware",
    "distribution-aware: each row's exact sigma",
    "#eeca3b",
    (q) => q.sMax.exact,
    true,
  ),
];
