import { attentionKind } from "./attention.ts";
import { finalNormKind } from "./finalNorm.ts";
import { l2AttentionKind } from "./l2Attention.ts";
import { layerNormKind } from "./layerNorm.ts";
import { linearKind } from "./linear.ts";
import { mlpKind } from "./mlp.ts";
import { patchEmbeddingKind } from "./patchEmbedding.ts";
import { poolKind } from "./pool.ts";
import { poolerKind } from "./pooler.ts";
import { residualKind } from "./residual.ts";
import { sequenceKind } from "./sequence.ts";
import { tokenEmbeddingKind } from "./tokenEmbedding.ts";
import type { LayerKindSpec } from "./types.ts";

/**
 * The layer table: kind name -> {@link LayerKindSpec} (auto_LiRPA style: each operator paired
 * with its bound rule; docs/math.md sections 2-3). The driver (src/lipschitz/compose.ts) looks
 * kinds up here and knows none by name. A new kind is one file with its record plus one line in
 * BUILTIN_KINDS, or a call to {@link registerLayerKind} from outside the package.
 */
const BUILTIN_KINDS: readonly LayerKindSpec[] = [
  patchEmbeddingKind,
  tokenEmbeddingKind,
  layerNormKind,
  attentionKind,
  l2AttentionKind,
  mlpKind,
  residualKind,
  sequenceKind,
  finalNormKind,
  poolKind,
  poolerKind,
  linearKind,
] as unknown as readonly LayerKindSpec[];

const REGISTRY = new Map<string, LayerKindSpec>(BUILTIN_KINDS.map((k) => [k.kind, k]));

/**
 * Registers a layer kind so that traces may name it and networkBounds composes its rule.
 *
 * @param spec the kind's record: name, parameter roles, rule, and optionally its tfjs forward,
 *   float64 reference and weight-only `prepare`.
 * @param options.replace allow replacing a kind already registered (default false).
 * @throws Error when the kind is already registered (and replace is not set) or the spec has no
 *   name or no rule.
 * @example
 *   registerLayerKind({ kind: "scale", params: { required: ["alpha"] },
 *     rule: (l) => ({ value: Math.abs(l.params.alpha.data[0]) }) });
 */
export function registerLayerKind<P>(
  spec: LayerKindSpec<P>,
  options: { replace?: boolean } = {},
): void {
  if (typeof spec.kind !== "string" || spec.kind === "")
    throw new Error("registerLayerKind: the kind needs a name");
  if (typeof spec.rule !== "function")
    throw new Error(`registerLayerKind: kind "${spec.kind}" has no rule`);
  if (REGISTRY.has(spec.kind) && !options.replace)
    throw new Error(`registerLayerKind: kind "${spec.kind}" is already registered`);
  REGISTRY.set(spec.kind, spec as unknown as LayerKindSpec);
}

/**
 * Removes a registered kind (for tests that register a toy kind). Built-in kinds stay.
 *
 * @returns whether a kind was removed.
 * @throws Error when asked to remove a built-in kind.
 * @example unregisterLayerKind("scale")
 */
export function unregisterLayerKind(kind: string): boolean {
  if (BUILTIN_KINDS.some((k) => k.kind === kind))
    throw new Error(`unregisterLayerKind: "${kind}" is a built-in kind`);
  return REGISTRY.delete(kind);
}

/**
 * The record of a layer kind.
 *
 * @throws Error naming the unknown kind and listing the known ones.
 * @example layerKind("layerNorm").params.required // ["gamma", "beta"]
 */
export function layerKind(kind: string): LayerKindSpec {
  const spec = REGISTRY.get(kind);
  if (spec === undefined)
    throw new Error(
      `no Lipschitz rule for layer kind "${kind}"; known kinds: ${layerKinds().join(", ")}`,
    );
  return spec;
}

/**
 * Every registered kind name, built-in ones first.
 *
 * @example layerKinds().includes("attention") // true
 */
export function layerKinds(): string[] {
  return [...REGISTRY.keys()];
}
