import { tanhPooler } from "../../nn/pooler.ts";
import { weightSpectralNorm } from "../weightCache.ts";
import { poolerBound } from "../rules/pooler.ts";
import { input } from "./view.ts";
import type { LayerKindSpec } from "./types.ts";

/**
 * BERT's pooler tanh(x W + b), [b, d] -> [b, d] (src/nn/pooler.ts). Roles w [d, d], b [d]. Rule
 * (docs/math.md section 3, "Pooler"): the exact local value ||W diag(1 - tanh^2(z))||_2, or
 * ||W||_2 when the options ask for relaxed MLP values; detail: both.
 */
export const poolerKind: LayerKindSpec<number> = {
  kind: "pooler",
  params: { required: ["w", "b"] },
  forward: (x, ctx) => ({ out: tanhPooler(x, ctx.params.w, ctx.params.b) }),
  reference64: (x, _shape, params) => {
    const out = params.b.shape[0];
    const d = x.length;
    const y = new Float64Array(out);
    for (let j = 0; j < out; j++) {
      let z = params.b.data[j];
      for (let i = 0; i < d; i++) z += x[i] * params.w.data[i * out + j];
      y[j] = Math.tanh(z);
    }
    return y;
  },
  prepare: (params) => weightSpectralNorm(params.w.data, params.w.shape[0], params.w.shape[1]),
  rule(layer) {
    const bound = poolerBound(
      input(layer).data,
      layer.params.w.data,
      layer.params.b.data,
      layer.prepared,
    );
    return { value: layer.options.mlp === "relaxed" ? bound.relaxed : bound.local, detail: bound };
  },
};
