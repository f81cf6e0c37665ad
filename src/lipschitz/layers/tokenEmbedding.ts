import { tokenEmbeddingBound } from "../rules/embedding.ts";
import type { LayerKindSpec } from "./types.ts";

/**
 * Text token embedding: the bounds are with respect to the embedded sequence (token ids are
 * discrete), so the layer is the identity there. Rule (docs/math.md section 3): 1.
 */
export const tokenEmbeddingKind: LayerKindSpec = {
  kind: "tokenEmbedding",
  params: { required: [] },
  forward: (x) => ({ out: x }),
  rule: () => ({ value: tokenEmbeddingBound() }),
};
