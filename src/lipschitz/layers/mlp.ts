import { mlp } from "../../nn/mlp.ts";
import { weightSpectralNorm } from "../weightCache.ts";
import { mlpBound } from "../rules/mlp.ts";
import { mlpRowJacobian } from "../rules/rowwise.ts";
import { activationDerivative } from "../../nn/gelu.ts";
import { extra } from "./view.ts";
import type { LayerKindSpec, LayerSettings } from "./types.ts";
import { ACTIVATIONS, type Activation } from "../../nn/gelu.ts";

/** The `activation` setting of an MLP layer: "gelu-tanh" when absent. @throws RangeError on another value. */
function activationSetting(settings: LayerSettings): Activation {
  const a = settings.activation ?? "gelu-tanh";
  if (!(ACTIVATIONS as readonly unknown[]).includes(a))
    throw new RangeError(
      `mlp: setting "activation" must be one of ${ACTIVATIONS.join(", ")}, got "${String(a)}"`,
    );
  return a as Activation;
}

/** Weight-only quantities of an MLP: float64 W_1 [d, hidden], W_2 [hidden, d] and their norms. */
export interface MlpPrepared {
  d: number;
  hidden: number;
  w1: Float64Array;
  w2: Float64Array;
  w1Norm: number;
  w2Norm: number;
}

/**
 * Row-wise MLP act(x W_1 + b_1) W_2 + b_2 (src/nn/mlp.ts). Roles w1 [d, hidden], b1, w2
 * [hidden, d], b2; extra `pre` = x W_1 + b_1 [b, n, hidden]; setting `activation` ("gelu-tanh",
 * the default when absent, or "gelu-erf"). Rule (docs/math.md section 3):
 * the exact local value max_row ||W_1 diag(act'(h_row)) W_2||, or the relaxed one when
 * options.mlp is "relaxed"; one value for every variant; `detail` is the MlpBound.
 */
export const mlpKind: LayerKindSpec<MlpPrepared> = {
  kind: "mlp",
  params: { required: ["w1", "b1", "w2", "b2"] },
  forward(x, ctx) {
    const p = ctx.params;
    const r = mlp(x, { w1: p.w1, b1: p.b1, w2: p.w2, b2: p.b2 }, activationSetting(ctx.settings));
    return { out: r.out, extras: { pre: r.h } };
  },
  prepare(params, _settings, name) {
    const { w1, w2 } = params;
    const [d, hidden] = w1.shape;
    if (w1.shape.length !== 2 || w2.shape[0] !== hidden || w2.shape[1] !== d)
      throw new RangeError(`${name}: expected w1 [${d}, hidden] and w2 [hidden, ${d}]`);
    return {
      d,
      hidden,
      w1: Float64Array.from(w1.data),
      w2: Float64Array.from(w2.data),
      w1Norm: weightSpectralNorm(w1.data, d, hidden),
      w2Norm: weightSpectralNorm(w2.data, hidden, d),
    };
  },
  rowJacobian(layer, row) {
    const pre = extra(layer, "pre");
    const m = layer.prepared;
    const act = activationDerivative(activationSetting(layer.settings));
    const g = Float64Array.from(pre.data.subarray(row * m.hidden, (row + 1) * m.hidden), (h) =>
      act.derivative(h),
    );
    return mlpRowJacobian(g, m.w1, m.w2, m.d, m.hidden);
  },
  rule(layer) {
    const pre = extra(layer, "pre");
    const m = layer.prepared;
    const local = layer.options.mlp === "local";
    const r = mlpBound(
      pre.data,
      pre.shape[0],
      m.d,
      m.hidden,
      m.w1,
      m.w2,
      { w1: m.w1Norm, w2: m.w2Norm },
      { local, activation: activationSetting(layer.settings) },
    );
    return { value: local ? r.local : r.relaxed, detail: r };
  },
};
