import type { tf } from "../backend.ts";
import type { NamedArray } from "../nn/params.ts";
import type { LayerTrace, TracedLayer } from "../nn/trace.ts";
import type { HeadVariant, VariantValues } from "./rules/headTypes.ts";
import { checkVariants, variantNames } from "./variants/index.ts";
import type { Weights } from "./rules/weightNorms.ts";
import { layerKind } from "./layers/registry.ts";
import type { ExampleArray, LayerKindSpec, LayerView, RuleOptions } from "./layers/types.ts";
import { perVariant } from "./layers/view.ts";

/**
 * The driver: composes the registered rules (src/lipschitz/layers/registry.ts) over a traced
 * layer list, in float64 on the JS side (docs/math.md sections 2-3). It knows no layer kind by
 * name: each entry's kind is looked up, its rule gets the entry's slice of the trace at one
 * example (its input, parameters, masks, extras such as attention probabilities) and, for a
 * composite, the bounds of its children; the network bound is the product over the top-level list.
 */

/** The bound of one traced layer at one example. */
export interface LayerReport {
  kind: string;
  name: string;
  /** Bound per variant (a shared value repeated for layers without attention). */
  values: VariantValues;
  /** The one value the rule gave for all variants, or null when it gave one per variant. */
  shared: number | null;
  /** Kind-specific details (attention: per-head values and statistics; mlp: MlpBound). */
  detail?: unknown;
  /** A composite's sub-layer reports, in forward order. */
  children: LayerReport[];
}

/**
 * Where {@link composeBounds} is: after each top-level layer (a whole block is one) of each
 * example, `layer` of `layers` (1-based) named `name` at example `example` (0-based) of `examples`.
 */
export interface LayerProgress {
  example: number;
  examples: number;
  layer: number;
  layers: number;
  name: string;
}

/** All layers of one example and their composition. */
export interface ComposedExample {
  layers: LayerReport[];
  /** Product of the top-level layers' bounds per variant. */
  network: VariantValues;
}

interface Resolved {
  layer: TracedLayer;
  spec: LayerKindSpec;
  params: Record<string, NamedArray>;
  prepared: unknown;
  children: Resolved[];
}

const prepareCache = new WeakMap<Weights, Map<string, unknown>>();

function resolve(layer: TracedLayer, weights: Weights): Resolved {
  const spec = layerKind(layer.kind);
  const params: Record<string, NamedArray> = {};
  for (const role of spec.params.required) {
    const name = layer.params[role];
    if (name === undefined)
      throw new Error(`${layer.name}: kind "${layer.kind}" needs a parameter for role "${role}"`);
    const w = weights.get(name);
    if (w === undefined) throw new Error(`lipschitz rules: missing weight "${name}"`);
    params[role] = w;
  }
  for (const role of spec.params.optional ?? []) {
    const name = layer.params[role];
    const w = name === undefined ? undefined : weights.get(name);
    if (w !== undefined) params[role] = w;
  }
  if (!spec.composite && (layer.children?.length ?? 0) > 0)
    throw new RangeError(`${layer.name}: kind "${layer.kind}" takes no sub-layers`);
  let prepared: unknown;
  if (spec.prepare) {
    const key = [
      layer.kind,
      layer.name,
      JSON.stringify(Object.entries(layer.params).sort()),
      JSON.stringify(layer.settings ?? {}),
    ].join("|");
    let perMap = prepareCache.get(weights);
    if (!perMap) prepareCache.set(weights, (perMap = new Map()));
    if (perMap.has(key)) prepared = perMap.get(key);
    else {
      prepared = spec.prepare(params, layer.settings ?? {}, layer.name);
      perMap.set(key, prepared);
    }
  }
  return {
    layer,
    spec,
    params,
    prepared,
    children: (layer.children ?? []).map((c) => resolve(c, weights)),
  };
}

function tensorsOf(layers: readonly TracedLayer[], out: tf.Tensor[] = []): tf.Tensor[] {
  for (const l of layers) {
    if (l.input) out.push(l.input);
    out.push(...Object.values(l.extras ?? {}));
    tensorsOf(l.children ?? [], out);
  }
  return out;
}

/**
 * The trace's batch size and readers of its tensors' values (each read once) and of one
 * example's slice.
 *
 * @throws RangeError when the trace holds no tensor or batch sizes disagree.
 */
function exampleReader(trace: LayerTrace): {
  b: number;
  read: (t: tf.Tensor) => Float32Array;
  slice: (t: tf.Tensor, e: number) => ExampleArray;
} {
  const tensors = tensorsOf(trace.layers);
  if (trace.mask) tensors.push(trace.mask);
  if (tensors.length === 0) throw new RangeError("composeBounds: the trace holds no tensor");
  const b = tensors[0].shape[0];
  for (const t of tensors)
    if (t.shape[0] !== b)
      throw new RangeError(
        `composeBounds: batch sizes disagree ([${t.shape.join(", ")}] vs ${b} examples)`,
      );
  const data = new Map<tf.Tensor, Float32Array>();
  const read = (t: tf.Tensor): Float32Array => {
    let d = data.get(t);
    if (d === undefined) data.set(t, (d = t.dataSync() as Float32Array));
    return d;
  };
  const slice = (t: tf.Tensor, e: number): ExampleArray => {
    const per = t.size / b;
    return { data: read(t).subarray(e * per, (e + 1) * per), shape: t.shape.slice(1) };
  };
  return { b, read, slice };
}

/**
 * The variants computed over a trace when none are asked for: the registered variants of
 * dot-product attention and every variant a kind in the trace adds (its spec's `extraVariants`;
 * L2 attention: `l2-dist`, `l2-cov`, `kim`), in the registry's order.
 *
 * @throws Error naming an unknown kind.
 * @example traceDefaultVariants(l2ModelTrace.layers).includes("kim") // true
 */
export function traceDefaultVariants(layers: readonly TracedLayer[]): HeadVariant[] {
  const extra = new Set<string>();
  const walk = (ls: readonly TracedLayer[]) => {
    for (const l of ls) {
      for (const v of layerKind(l.kind).extraVariants ?? []) extra.add(v);
      walk(l.children ?? []);
    }
  };
  walk(layers);
  const dot = new Set(variantNames("dot"));
  return variantNames().filter((v) => dot.has(v) || extra.has(v));
}

/**
 * The bounds of every traced layer at each example, and their composition (the network bound
 * per variant, docs/math.md sections 2-3).
 *
 * @param weights the model's weights by name (`model.getWeights()`; pass the same Map across
 *   calls to reuse the kinds' cached `prepare` results; do not mutate a cached map).
 * @param trace a {@link LayerTrace}: layers whose tensors all have the batch first ([b, n, d],
 *   attention p [b, H, n, n]), mask [b, n] or null, allowed broadcastable to [b, 1, n, n] or null.
 *   Tensors are read, not disposed.
 * @param options.mlp "local" (default) or "relaxed" (see networkBounds).
 * @param options.onLayer called after each top-level layer of each example ({@link LayerProgress}).
 * @param options.variants the head variants to compute (default {@link traceDefaultVariants}:
 *   the registered variants of dot-product attention, and `l2-dist`, `l2-cov`, `kim` when the
 *   trace holds L2 attention; see checkVariants).
 * @returns one {@link ComposedExample} per example.
 * @throws Error naming an unknown kind, a missing role or a missing weight; RangeError when the
 *   trace holds no tensor, batch sizes disagree, or a rule rejects its layer.
 * @example
 *   const { trace } = model.forward(x, { trace: true });
 *   composeBounds(model.getWeights(), trace!)[0].network["t3-exact"];
 */
export function composeBounds(
  weights: Weights,
  trace: LayerTrace,
  options: Partial<RuleOptions> & { onLayer?: (progress: LayerProgress) => void } = {},
): ComposedExample[] {
  const mlp = options.mlp ?? "local";
  if (mlp !== "local" && mlp !== "relaxed")
    throw new RangeError(`options.mlp must be "local" or "relaxed", got "${String(mlp)}"`);
  const variants = checkVariants(
    options.variants ?? traceDefaultVariants(trace.layers),
    "composeBounds",
  );
  const ruleOptions: RuleOptions = { mlp, variants };
  // Resolved (weights looked up, weight-only quantities prepared) as each layer is first reached,
  // so that progress lines also cover the preparation (the weight norms of a BERT-base's first
  // analysis take about a minute: docs/performance.md).
  const resolved: Resolved[] = [];
  const resolvedAt = (i: number) => (resolved[i] ??= resolve(trace.layers[i], weights));
  const { b, read, slice } = exampleReader(trace);
  const masksFor = maskReader(trace, b, read);

  const evaluate = (
    r: Resolved,
    e: number,
    mask: LayerView["mask"],
  ): { report: LayerReport; view: LayerView } => {
    const evaluated = r.children.map((c) => evaluate(c, e, mask));
    const children = evaluated.map((c) => c.report);
    const extras: Record<string, ExampleArray> = {};
    for (const [k, t] of Object.entries(r.layer.extras ?? {})) extras[k] = slice(t, e);
    const view: LayerView = {
      kind: r.layer.kind,
      name: r.layer.name,
      input: r.layer.input ? slice(r.layer.input, e) : null,
      params: r.params,
      extras,
      settings: r.layer.settings ?? {},
      mask,
      prepared: r.prepared,
      children: children.map((c) => c.values),
      childViews: evaluated.map((c) => c.view),
      options: ruleOptions,
      rowJacobian: (row) => (r.spec.rowJacobian ? r.spec.rowJacobian(view, row) : null),
      rowwise:
        r.spec.rowJacobian !== undefined &&
        (!r.spec.composite || (evaluated.length > 0 && evaluated.every((c) => c.view.rowwise))),
      boundAfterRowwise: (before) =>
        r.spec.ruleAfterRowwise ? r.spec.ruleAfterRowwise(view, before) : null,
      boundBeforeRowwise: (after) =>
        r.spec.ruleBeforeRowwise ? r.spec.ruleBeforeRowwise(view, after) : null,
      boundBetweenRowwise: (before, after) =>
        r.spec.ruleBetweenRowwise ? r.spec.ruleBetweenRowwise(view, before, after) : null,
    };
    const bound = r.spec.rule(view);
    const v = bound.value;
    const report: LayerReport = {
      kind: r.layer.kind,
      name: r.layer.name,
      values: typeof v === "number" ? perVariant(() => v, variants) : v,
      shared: typeof v === "number" ? v : null,
      detail: bound.detail,
      children,
    };
    return { report, view };
  };

  const examples: ComposedExample[] = [];
  for (let e = 0; e < b; e++) {
    const mask = masksFor(e);
    const layers = trace.layers.map((l, i) => {
      const report = evaluate(resolvedAt(i), e, mask).report;
      options.onLayer?.({
        example: e,
        examples: b,
        layer: i + 1,
        layers: trace.layers.length,
        name: l.name,
      });
      return report;
    });
    const network = perVariant((name) => layers.reduce((p, l) => p * l.values[name], 1), variants);
    examples.push({ layers, network });
  }
  return examples;
}

/**
 * Per example, the real rows [n] from trace.mask and the allowed keys [n, n] from
 * trace.allowed (broadcast over its size-1 axes): the masks the forward pass used.
 */
function maskReader(
  trace: LayerTrace,
  b: number,
  read: (t: tf.Tensor) => Float32Array,
): (e: number) => LayerView["mask"] {
  const { mask, allowed } = trace;
  if (mask !== null && (mask.rank !== 2 || mask.shape[0] !== b))
    throw new RangeError(`composeBounds: mask must be [${b}, n], got [${mask.shape.join(", ")}]`);
  if (
    allowed !== null &&
    (allowed.rank !== 4 || (allowed.shape[0] !== 1 && allowed.shape[0] !== b))
  )
    throw new RangeError(
      `composeBounds: allowed must be [${b} or 1, 1, n or 1, n], got [${allowed.shape.join(", ")}]`,
    );
  return (e) => {
    const out: LayerView["mask"] = {};
    if (mask !== null) {
      const m = read(mask);
      const n = mask.shape[1] as number;
      out.real = Uint8Array.from(m.subarray(e * n, (e + 1) * n), (v) => (v !== 0 ? 1 : 0));
    }
    if (allowed !== null) {
      const a = read(allowed);
      const [ab, , an, n] = allowed.shape as [number, number, number, number];
      const ae = ab === 1 ? 0 : e;
      const rows = new Uint8Array(n * n);
      for (let i = 0; i < n; i++) {
        const ai = an === 1 ? 0 : i;
        for (let j = 0; j < n; j++) rows[i * n + j] = a[(ae * an + ai) * n + j] !== 0 ? 1 : 0;
      }
      out.allowed = rows;
    }
    return out;
  };
}
