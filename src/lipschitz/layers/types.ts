import type { tf } from "../../backend.ts";
import type { NamedArray } from "../../nn/params.ts";
import type { HeadVariant, VariantValues } from "../rules/headTypes.ts";
import type { RowJacobian } from "../rules/rowwise.ts";

/**
 * The shape of a layer kind (docs/design.md, "Add a layer kind"): one record
 * per kind pairs its tfjs forward, its parameter roles, an optional float64 reference and its
 * local Lipschitz rule, auto_LiRPA style. The registry (registry.ts) maps kind names to records;
 * the driver (src/lipschitz/compose.ts) composes the rules over a traced layer list and knows no
 * kind by name.
 */

/** Kind-specific settings of a layer (LayerNorm eps, heads, pooling). */
export type LayerSettings = Readonly<Record<string, number | string | boolean>>;

/** One example's slice of a traced tensor: the values (float32 or float64) and their shape. */
export interface ExampleArray {
  data: Float32Array | Float64Array;
  /** The tensor's shape without the batch axis, e.g. [n, d]. */
  shape: readonly number[];
}

/** Options every rule sees (networkBounds options). */
export interface RuleOptions {
  /** Which MLP value the blocks compose: "local" (exact, default) or "relaxed". */
  mlp: "local" | "relaxed";
  /**
   * The head variants to compute, in the registry's order (src/lipschitz/variants/). A rule that gives a
   * value per variant gives exactly these (`cov`, the costly one, may be left out).
   */
  variants: readonly HeadVariant[];
}

/**
 * What a rule sees of one traced layer at one example: the one signature all rules share.
 * Tensors are that example's slices; parameters are the model's weights by role.
 */
export interface LayerView<P = unknown> {
  kind: string;
  name: string;
  /** This example's input (e.g. [n, d]); null when the trace did not keep it. */
  input: ExampleArray | null;
  /** The layer's parameters by role (roles absent from the weights are left out). */
  params: Readonly<Record<string, NamedArray>>;
  /** This example's kind-specific tensors (attention: q, k, v [H, n, d_k], p [H, n, n]). */
  extras: Readonly<Record<string, ExampleArray>>;
  settings: LayerSettings;
  /**
   * This example's masks: `real` [n] (nonzero = real token) and `allowed` [n, n] (row = query,
   * nonzero = may attend); undefined when nothing is masked.
   */
  mask: { real?: Uint8Array; allowed?: Uint8Array };
  /** What the kind's `prepare` computed from the parameters (cached per weights map and layer). */
  prepared: P;
  /** A composite's sub-layer bounds per variant, in forward order; empty for a leaf. */
  children: readonly VariantValues[];
  /** A composite's sub-layers as their rules see them, in forward order; empty for a leaf. */
  childViews: readonly LayerView[];
  /**
   * This entry's row Jacobian at `row` through its kind's {@link LayerKindSpec.rowJacobian}
   * (null when the kind has none or the entry is not row-wise).
   */
  rowJacobian(row: number): RowJacobian | null;
  /**
   * Whether this entry maps each row on its own: its kind gives row Jacobians and, for a
   * composite, so do all its sub-layers (then {@link rowJacobian} is never null).
   */
  rowwise: boolean;
  /**
   * This entry's bound after a row-wise map (its kind's {@link LayerKindSpec.ruleAfterRowwise}),
   * for the variants the kind bounds jointly; null when the kind has no such rule.
   */
  boundAfterRowwise(before: RowwiseBefore): Partial<VariantValues> | null;
  /**
   * A bound on ||D(G o this entry)||_2 for a row-wise map G that runs just after it (its kind's
   * {@link LayerKindSpec.ruleBeforeRowwise}), for the variants the kind bounds jointly; null
   * when the kind has no such rule.
   */
  boundBeforeRowwise(after: RowwiseBefore): Partial<VariantValues> | null;
  /**
   * A bound on ||D(G o this entry o F)||_2 for row-wise maps F just before it (null: none) and
   * G just after it (its kind's {@link LayerKindSpec.ruleBetweenRowwise}); null when the kind
   * has no such rule.
   */
  boundBetweenRowwise(
    before: RowwiseBefore | null,
    after: RowwiseBefore,
  ): Partial<VariantValues> | null;
  options: RuleOptions;
}

/**
 * A row-wise map that runs just before a layer inside a composite (a pre-LN block's LayerNorm
 * before attention), or just after one (the MLP half of the block after its attention
 * residual): its row Jacobians at this example and its own bound.
 */
export interface RowwiseBefore {
  /** The map's Jacobian at row `row` of its input (row-vector convention, d x d). */
  rowJacobian(row: number): RowJacobian;
  /** The map's own bound per variant (at least max_j ||L_j||_2). */
  bound: VariantValues;
}

/**
 * A rule's result: one value shared by every variant (layers without attention) or a value per
 * variant (docs/math.md section 2), and kind-specific details for reports.
 */
export interface LayerBound {
  value: number | VariantValues;
  detail?: unknown;
}

/** What a kind's tfjs forward receives besides its input. */
export interface ForwardContext {
  /** Parameters by role (optional roles absent when the store lacks them). */
  params: Readonly<Record<string, tf.Tensor>>;
  settings: LayerSettings;
  /** Attention mask broadcastable to [b, heads, n, n] (src/nn/mask.ts), or null. */
  allowed: tf.Tensor | null;
  /** Padding mask [b, n] (1 = real token), or null. */
  mask: tf.Tensor | null;
  /** A composite's sub-layers run in order on a tensor (identity for a leaf). */
  inner: (x: tf.Tensor) => tf.Tensor;
}

/** A kind's tfjs output and the tensors its rule needs beyond its input (batch first). */
export interface ForwardOutput {
  out: tf.Tensor;
  extras?: Record<string, tf.Tensor>;
}

/**
 * One layer kind. `rule` is required; `forward` runs the kind in tfjs (src/lipschitz/layers/
 * forward.ts); `reference64` is its float64 oracle for tests where one exists.
 */
export interface LayerKindSpec<P = unknown> {
  /** The name traces use in `kind`. */
  kind: string;
  /** Parameter roles: required ones must be in the weights, optional ones may be missing. */
  params: { required: readonly string[]; optional?: readonly string[] };
  /** Whether entries of this kind hold sub-layers (residual branches, blocks). */
  composite?: boolean;
  /**
   * Variants beyond those of dot-product attention that this kind computes, added to the default variant list
   * when a trace holds the kind (L2 attention: `l2-dist`, `l2-cov`, its local bounds, and `kim`,
   * its global bound).
   */
  extraVariants?: readonly HeadVariant[];
  /** The tfjs forward, input [b, ...] -> output [b, ...]. */
  forward?: (x: tf.Tensor, ctx: ForwardContext) => ForwardOutput;
  /** Float64 reference of one example (input shape without batch) -> output, row-major. */
  reference64?: (
    x: Float64Array,
    shape: readonly number[],
    params: Readonly<Record<string, NamedArray>>,
    settings: LayerSettings,
  ) => Float64Array;
  /**
   * Row-wise kinds (each token's row is mapped on its own: LayerNorm, the MLP, and residuals
   * and sequences of such layers): the Jacobian of row `row` at this example, d x d row-major
   * in the row-vector convention (dy = dx J); null when this entry is not row-wise (e.g. a
   * residual around attention). Composites use it to bound row-wise runs exactly
   * (docs/math.md section 3, "Row-wise runs").
   */
  rowJacobian?: (layer: LayerView<P>, row: number) => RowJacobian | null;
  /** Input-independent quantities from the parameters (norms, float64 copies), cached. */
  prepare?: (
    params: Readonly<Record<string, NamedArray>>,
    settings: LayerSettings,
    name: string,
  ) => P;
  /** The local Lipschitz rule (docs/math.md sections 2-3). */
  rule: (layer: LayerView<P>) => LayerBound;
  /**
   * Optional: bounds that hold at EVERY input of `n` tokens without masked keys (global
   * Lipschitz constants, e.g. L2 attention's `kim`), from the prepared parameters; `attnlip
   * radius` draws them as horizontal lines. Kinds that are not globally Lipschitz (dot-product
   * attention) have none.
   */
  globalBounds?: (prepared: P, n: number) => { name: string; value: number }[];
  /**
   * Optional: a bound on ||D(layer o G)||_2 for a row-wise map G that runs just before this layer
   * (docs/math.md section 3, "A row-wise map fused into the next layer"), for the variants this
   * kind bounds jointly (attention: `fused`); a composite uses it in place of the product of the
   * two bounds for those variants.
   */
  ruleAfterRowwise?: (layer: LayerView<P>, before: RowwiseBefore) => Partial<VariantValues>;
  /**
   * Optional: a bound on ||D(G o layer)||_2 for a row-wise map G that runs just after this layer
   * (docs/math.md section 3, "A row-wise run fused into the layer before it"), for the variants
   * this kind bounds jointly (a residual whose branch ends in attention: `fused`); a composite
   * uses it, when smaller, in place of the product of the two bounds.
   */
  ruleBeforeRowwise?: (layer: LayerView<P>, after: RowwiseBefore) => Partial<VariantValues> | null;
  /**
   * Optional: a bound on ||D(G o layer o F)||_2 for row-wise maps F before (null: none) and G
   * after this layer (attention: `fused`, with F's row Jacobians in its token weights and G's in
   * its output-row weights).
   */
  ruleBetweenRowwise?: (
    layer: LayerView<P>,
    before: RowwiseBefore | null,
    after: RowwiseBefore,
  ) => Partial<VariantValues>;
}
