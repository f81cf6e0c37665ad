import type { tf } from "../../backend.ts";
import type { TracedLayer } from "../../nn/trace.ts";
import { layerKind } from "./registry.ts";
import type { LayerSettings } from "./types.ts";

/** A layer as a model declares it: a registered kind, a name, parameter names by role. */
export interface LayerDecl {
  kind: string;
  name: string;
  /** Parameter name for each role of the kind (default: `${name}.${role}` for every role). */
  params?: Readonly<Record<string, string>>;
  settings?: LayerSettings;
  /** Sub-layers of a composite kind (residual, sequence), in order. */
  children?: readonly LayerDecl[];
}

/** Output of {@link forwardLayers}: the last layer's output and the traced layer list. */
export interface LayersForward {
  out: tf.Tensor;
  layers: TracedLayer[];
}

/** Where parameters come from: a ParamStore or a Map of tensors. */
export interface ParamSource {
  has(name: string): boolean;
  get(name: string): tf.Tensor | undefined;
}

/**
 * Runs declared layers in order with each kind's tfjs forward (src/lipschitz/layers/registry.ts)
 * and traces them: the generic model for kinds that the classifiers (src/nn/model.ts) do not
 * hard-wire. Composites run their children on their input through the kind's forward.
 * Tensors are not kept: run inside tf.tidy and keep traceTensors of the result.
 *
 * @param x float32 [b, ...] (the first layer's input, e.g. [b, n, d]).
 * @param decls the layers, in forward order.
 * @param params the parameters by name.
 * @param options.allowed / options.mask the attention and padding masks (src/nn/mask.ts).
 * @returns the output [b, ...] and one {@link TracedLayer} per declaration (inputs, extras).
 * @throws Error on an unknown kind, a kind without forward, or a missing required parameter.
 * @example
 *   const { out, layers } = forwardLayers(x, [
 *     { kind: "layerNorm", name: "ln", settings: { eps: 1e-5 } },
 *     { kind: "residual", name: "res", children: [{ kind: "mlp", name: "mlp" }] },
 *   ], model.params);
 */
export function forwardLayers(
  x: tf.Tensor,
  decls: readonly LayerDecl[],
  params: ParamSource,
  options: { allowed?: tf.Tensor | null; mask?: tf.Tensor | null } = {},
): LayersForward {
  const layers: TracedLayer[] = [];
  let h = x;
  for (const decl of decls) {
    const spec = layerKind(decl.kind);
    if (!spec.forward) throw new Error(`${decl.name}: kind "${decl.kind}" has no tfjs forward`);
    const names: Record<string, string> = {};
    const tensors: Record<string, tf.Tensor> = {};
    const optional = new Set(spec.params.optional ?? []);
    for (const role of [...spec.params.required, ...optional]) {
      const name = decl.params?.[role] ?? `${decl.name}.${role}`;
      names[role] = name;
      const t = params.has(name) ? params.get(name) : undefined;
      if (t !== undefined) tensors[role] = t;
      else if (!optional.has(role)) throw new Error(`${decl.name}: missing parameter "${name}"`);
    }
    let children: TracedLayer[] | undefined;
    const inner = (y: tf.Tensor): tf.Tensor => {
      const r = forwardLayers(y, decl.children ?? [], params, options);
      children = r.layers;
      return r.out;
    };
    const r = spec.forward(h, {
      params: tensors,
      settings: decl.settings ?? {},
      allowed: options.allowed ?? null,
      mask: options.mask ?? null,
      inner,
    });
    layers.push({
      kind: decl.kind,
      name: decl.name,
      input: h,
      params: names,
      extras: r.extras,
      settings: decl.settings,
      children: spec.composite ? (children ?? []) : undefined,
    });
    h = r.out;
  }
  return { out: h, layers };
}
