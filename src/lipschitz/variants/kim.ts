import { kimHeadBound } from "../rules/kim.ts";
import type { L2GlobalBoundVariant } from "./registry.ts";

/**
 * Why dot-product attention has no `kim` value: the message of the InputError its rules throw
 * when `kim` is asked for (prefixed by the layer's name).
 */
export const KIM_DOT_REFUSED =
  'variant "kim" (Kim et al. 2021, Theorem 3.2) bounds L2 attention only: dot-product attention is not globally Lipschitz (Kim et al. Theorem 3.1), so it has no global bound; ask for the local variants';

/**
 * `kim`: Kim, Papamakarios and Mnih's global bound of L2 self-attention (ICML 2021, Theorem 3.2;
 * docs/math.md section 2, "L2 self-attention"; rules/kim.ts), per head from its weight norms.
 */
export const KIM_VARIANT: L2GlobalBoundVariant = {
  name: "kim",
  kind: "l2-global",
  family: "prior art",
  note: "L2 attention only: Kim et al.'s global bound of the attention layer (Theorem 3.2), composed with the other layers' local rules",
  math: "L2 self-attention",
  colour: "#393b79",
  summary: true,
  compute: (w) => kimHeadBound(w.n, w.dk, w.wq, w.wv),
  dotRefusal: KIM_DOT_REFUSED,
};
