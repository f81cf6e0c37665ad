import type { ModelConfig } from "../nn/config.ts";
import { TRACE_NAMES, type ForwardTrace, type LayerTrace } from "../nn/trace.ts";
import type { HeadVariant, VariantValues } from "./rules/headTypes.ts";
import { checkVariants } from "./variants/index.ts";
import type { MlpBound } from "./rules/mlp.ts";
import type { Weights } from "./rules/weightNorms.ts";
import {
  composeBounds,
  traceDefaultVariants,
  type LayerProgress,
  type LayerReport,
} from "./compose.ts";
import type { AttentionDetail, HeadReport } from "./layers/attention.ts";

export { attentionStats, type AttentionStats, type HeadReport } from "./layers/attention.ts";

/**
 * Bounds over a traced forward pass: the driver (compose.ts) composes the registered layer
 * rules over the trace's layer list; this file adds the per-block view of a transformer
 * classifier's trace (docs/math.md sections 2-3; docs/design.md, Data flow).
 */

/** One block on one example (a view of the block's layer reports). */
export interface BlockReport {
  heads: HeadReport[];
  /** Multi-head attention layer bound per variant (||W_O|| (sum_h L_h^2)^(1/2)). */
  attention: VariantValues;
  /** LayerNorm factors at their own inputs (max over rows). */
  ln1: number;
  ln2: number;
  /** MLP: local, relaxed and input-free values. */
  mlp: MlpBound;
  /** Block bound per variant. */
  block: VariantValues;
}

/** Everything for one example of the batch. */
export interface ExampleReport {
  /** Every traced layer's bound, in the trace's order (composites hold their sub-layers). */
  layers: LayerReport[];
  /** Per block named blocks.i with attn, ln1, ln2 and mlp sub-layers (empty otherwise). */
  blocks: BlockReport[];
  /** Embedding factor (ViT: ||patch.w||_2; text: 1, the input being the embedded sequence); 1 when absent. */
  embedding: number;
  /** Final LayerNorm + pooling factor; 1 when absent. */
  finalNorm: number;
  /** ||head.w||_2; 1 when absent. */
  head: number;
  /**
   * The product of every top-level layer's factor other than the blocks (embedding, embedding
   * LayerNorm, final norm or pooling, pooler, head): what multiplies the blocks' product in the
   * network bound.
   */
  outside: number;
  /** Whole-network bound per variant: the product of the top-level layers' bounds. */
  network: VariantValues;
}

/** Result of {@link networkBounds}. */
export interface NetworkBounds {
  variants: readonly HeadVariant[];
  /** What the network bound is with respect to: image pixels (ViT) or the embedded sequence (text). */
  inputSpace: "image" | "embedding";
  /** Which MLP value the block bounds compose. */
  mlpInBlock: "local" | "relaxed";
  examples: ExampleReport[];
}

/** Options of {@link networkBounds}. */
export interface NetworkBoundsOptions {
  /**
   * "local" (default): blocks use the exact local MLP value (O(n d^2 hidden) per block and
   * example); "relaxed": ||W_1|| max|act'| ||W_2||, much cheaper.
   */
  mlp?: "local" | "relaxed";
  /**
   * The head variants to compute (default every registered variant of dot-product attention, and of L2 attention (`l2-dist`, `l2-cov`, `kim`) for a
   * model with L2 attention: traceDefaultVariants). Asking for `kim` on dot-product attention
   * throws (it is not globally Lipschitz, Kim et al. 2021 Theorem 3.1), and so does asking for
   * `l2-dist` or `l2-cov` (derived for L2 scores). Leaving out `cov` skips its
   * exact query path, the dominant cost on long sequences (O(n^2 d_k^2) per head).
   */
  variants?: readonly HeadVariant[];
  /** Called after each top-level layer (a whole block is one) of each example: progress lines. */
  onLayer?: (progress: LayerProgress) => void;
}

/**
 * A model (anything with its config and getWeights), or weights with an optional config (the
 * config, when given, is checked against the trace).
 */
export type BoundSource =
  { config: ModelConfig; getWeights(): Weights } | { config?: ModelConfig; weights: Weights };

/**
 * Local Lipschitz bounds of every traced layer, every block and head, and of the whole network
 * at each example of a traced forward pass: the registered rule of each layer kind
 * (src/lipschitz/layers/registry.ts), composed over the trace's layer list by
 * {@link composeBounds} (residual branches 1 + L, sequences and the network as products;
 * docs/math.md sections 2-3).
 *
 * @param source the model, or {weights, config?} (pass the same weights Map across calls to
 *   reuse the cached weight norms).
 * @param trace from `model.forward(x, {trace: true})` or `forwardFromEmbeddings`, or any
 *   {@link LayerTrace} of registered kinds; tensors are read, not disposed. Shapes: layer inputs
 *   [b, n, d], attention q/k/v [b, H, n, d_k], p [b, H, n, n], mlp pre [b, n, hidden],
 *   mask [b, n] or null.
 * @param options see {@link NetworkBoundsOptions}.
 * @returns per example: every layer's report; per block, per head every variant with attention
 *   statistics; per block the attention, LN, MLP and block bounds; the network bound per
 *   variant. Masks: padded keys (and, for causal text models, future keys) are masked; padded
 *   query rows are ordinary rows of each layer (they attend to the real keys), so layer bounds
 *   cover them; statistics use real rows only.
 * @throws Error naming a missing weight or an unknown layer kind; RangeError when the trace does
 *   not match the config or options.mlp is unknown.
 * @example
 *   const { logits, trace } = model.forward(x, { trace: true });
 *   const nb = networkBounds(model, trace!);
 *   nb.examples[0].network["t3-exact"]; // >= the true local Lipschitz constant at x[0]
 */
export function networkBounds(
  source: BoundSource,
  trace: LayerTrace,
  options: NetworkBoundsOptions = {},
): NetworkBounds {
  const config = source.config;
  const weights = "weights" in source ? source.weights : source.getWeights();
  const mlpChoice = options.mlp ?? "local";
  if (mlpChoice !== "local" && mlpChoice !== "relaxed")
    throw new RangeError(
      `networkBounds: options.mlp must be "local" or "relaxed", got "${String(mlpChoice)}"`,
    );
  const views = trace as Partial<ForwardTrace>;
  if (config !== undefined && views.blocks !== undefined && views.blocks.length !== config.blocks)
    throw new RangeError(
      `networkBounds: trace has ${views.blocks.length} blocks, config ${config.blocks}`,
    );
  if (config !== undefined && views.embedding !== undefined) {
    const dTrace = views.embedding.shape[2];
    if (dTrace !== config.dModel)
      throw new RangeError(`networkBounds: trace width ${dTrace}, config dModel ${config.dModel}`);
  }
  const variants = checkVariants(
    options.variants ?? traceDefaultVariants(trace.layers),
    "networkBounds",
  );
  const examples = composeBounds(weights, trace, {
    mlp: mlpChoice,
    variants,
    onLayer: options.onLayer,
  }).map((ex) => ({
    layers: ex.layers,
    ...classifierView(ex.layers),
    network: ex.network,
  }));
  return {
    variants,
    inputSpace: trace.inputSpace ?? (config?.kind === "vit" ? "image" : "embedding"),
    mlpInBlock: mlpChoice,
    examples,
  };
}

/**
 * The per-block view of a classifier's layer reports (names of src/nn/trace.ts TRACE_NAMES and
 * src/nn/block.ts blockLayer): blocks.i with blocks.i.{attn,ln1,ln2,mlp}, embedding, norm, head.
 */
function classifierView(
  layers: LayerReport[],
): Pick<ExampleReport, "blocks" | "embedding" | "finalNorm" | "head" | "outside"> {
  const byName = new Map<string, LayerReport>();
  const walk = (rs: LayerReport[]) => {
    for (const r of rs) {
      byName.set(r.name, r);
      walk(r.children);
    }
  };
  walk(layers);
  const one = (r: LayerReport) => r.shared ?? Object.values(r.values)[0];
  const factor = (name: string) => {
    const r = byName.get(name);
    return r === undefined ? 1 : one(r);
  };
  const blocks: BlockReport[] = [];
  for (let i = 0; ; i++) {
    const name = TRACE_NAMES.block(i);
    const [blk, attn, ln1, ln2, mlp] = ["", ".attn", ".ln1", ".ln2", ".mlp"].map((s) =>
      byName.get(name + s),
    );
    if (!blk || !attn || !ln1 || !ln2 || !mlp) break;
    blocks.push({
      heads: (attn.detail as AttentionDetail).heads,
      attention: attn.values,
      ln1: one(ln1),
      ln2: one(ln2),
      mlp: mlp.detail as MlpBound,
      block: blk.values,
    });
  }
  const blockNames = new Set(blocks.map((_, i) => TRACE_NAMES.block(i)));
  const outside = layers.filter((r) => !blockNames.has(r.name)).reduce((p, r) => p * one(r), 1);
  return {
    blocks,
    outside,
    embedding: factor(TRACE_NAMES.embedding),
    finalNorm: factor(TRACE_NAMES.norm),
    head: factor(TRACE_NAMES.head),
  };
}
