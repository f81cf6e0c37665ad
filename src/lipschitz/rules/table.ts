import { attentionHeadBounds } from "./attentionHead.ts";
import { attentionLayerBound } from "./attentionLayer.ts";
import { blockBound, residualBound } from "./block.ts";
import { patchEmbeddingBound, tokenEmbeddingBound } from "./embedding.ts";
import { layerNormBound } from "./layerNorm.ts";
import { mlpBound } from "./mlp.ts";
import { finalNormBound, headBound } from "./output.ts";

/**
 * The table of local Lipschitz rules, one per layer kind (auto_LiRPA style: each operator
 * paired with its bound rule; docs/math.md sections 2-3). {@link networkBounds} composes them over a
 * traced forward pass.
 */
export const RULES = {
  attentionHead: attentionHeadBounds,
  attention: attentionLayerBound,
  layerNorm: layerNormBound,
  mlp: mlpBound,
  residual: residualBound,
  block: blockBound,
  patchEmbedding: patchEmbeddingBound,
  tokenEmbedding: tokenEmbeddingBound,
  finalNorm: finalNormBound,
  head: headBound,
} as const;

/** A layer kind with a rule. */
export type LayerKind = keyof typeof RULES;

/** Every layer kind with a rule. */
export const LAYER_KINDS = Object.keys(RULES) as LayerKind[];

/**
 * The rule of a layer kind.
 *
 * @throws Error naming the unknown kind and listing the known ones.
 */
export function ruleFor<K extends LayerKind>(kind: K): (typeof RULES)[K];
export function ruleFor(kind: string): (typeof RULES)[LayerKind];
export function ruleFor(kind: string): (typeof RULES)[LayerKind] {
  if (!Object.hasOwn(RULES, kind))
    throw new Error(
      `no Lipschitz rule for layer kind "${kind}"; known kinds: ${LAYER_KINDS.join(", ")}`,
    );
  return RULES[kind as LayerKind];
}
