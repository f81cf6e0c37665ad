import { oneHotFloat, tf } from "../backend.ts";
import { eachLayer, findLayer, TRACE_NAMES, traceTensors, type LayerTrace } from "../nn/trace.ts";
import type { NamedArray } from "../nn/params.ts";
import { composeBounds } from "../lipschitz/compose.ts";
import { forwardLayers, type ParamSource } from "../lipschitz/layers/forward.ts";
import { layerKind } from "../lipschitz/layers/registry.ts";
import type { LayerSettings } from "../lipschitz/layers/types.ts";
import type { HeadVariant, VariantValues } from "../lipschitz/rules/attentionHead.ts";
import type { Weights } from "../lipschitz/rules/weightNorms.ts";
import { spectralNorm } from "../lipschitz/linalg.ts";
import { powerIterationLipschitz } from "../lipschitz/truth/powerIteration.ts";

/**
 * The map `attnlip radius` measures: one block's attention sub-layer alone, X -> Attn(X) on all
 * n tokens at once (X [n, d], the tokens the sub-layer reads: in a pre-LN block the first
 * LayerNorm's output, in a post-LN block the block input; no residual, no LayerNorm), with its
 * output projection and biases; Castin et al. (ICML 2024) measure this map. It is found in a
 * trace through the layer table (src/lipschitz/layers/registry.ts), not by name: the first
 * non-composite layer inside block i that records attention probabilities (extras `p`), whatever
 * its kind. Its forward is its kind's tfjs forward and its bounds are its kind's rule, so
 * another attention kind (L2 attention) needs no change here.
 */

/** One block's attention sub-layer as a trace declares it. */
export interface AttentionSublayer {
  kind: string;
  name: string;
  /** Parameter name per role (e.g. wq -> "blocks.0.attn.wq"). */
  params: Readonly<Record<string, string>>;
  settings: LayerSettings;
}

/**
 * The attention sub-layer of block `block` in a trace, and its input tensor [b, n, d].
 *
 * @throws RangeError naming the block when the trace has no such block or no layer in it records
 *   attention probabilities.
 * @example const { layer, input } = findAttentionSublayer(trace, 0); // layer.kind "attention"
 */
export function findAttentionSublayer(
  trace: LayerTrace,
  block: number,
): { layer: AttentionSublayer; input: tf.Tensor } {
  const name = TRACE_NAMES.block(block);
  const entry = findLayer(trace.layers, name);
  if (entry === undefined) throw new RangeError(`the trace has no block "${name}"`);
  let found: { layer: AttentionSublayer; input: tf.Tensor } | undefined;
  eachLayer(entry.children ?? [], (l) => {
    if (found !== undefined || l.extras?.p === undefined || l.input === null) return;
    if (layerKind(l.kind).composite) return;
    found = {
      layer: { kind: l.kind, name: l.name, params: l.params, settings: l.settings ?? {} },
      input: l.input,
    };
  });
  if (found === undefined)
    throw new RangeError(`${name} holds no attention layer (none records "p")`);
  return found;
}

/** A true local value of the sub-layer at one input, and how it was made. */
export interface TrueValue {
  /** ||D Attn(X)||_2 (Frobenius in, Frobenius out). */
  value: number;
  /** "dense": largest singular value of the exact n d x n d Jacobian; "lanczos": Krylov estimate from below. */
  method: "dense" | "lanczos";
  /** Always true for "dense"; the residual test's verdict for "lanczos". */
  converged: boolean;
  /** Products with Df^T Df ("lanczos"), 0 for "dense". */
  iterations: number;
}

/** Options of {@link SublayerMap.truth}. */
export interface TruthOptions {
  /** Dense Jacobian when n d is at most this (default 400), else Lanczos. */
  denseLimit?: number;
  /** Lanczos cap on products (default 1000). */
  maxIterations?: number;
  /** Lanczos seed (default 0). */
  seed?: number;
}

/** A square 0/1 mask [m, m] (row = query) as a [1, 1, m, m] float32 tensor, or null when all ones. */
function allowedTensor(allowed: Uint8Array | null, m: number): tf.Tensor | null {
  if (allowed === null || allowed.every((v) => v !== 0)) return null;
  return tf.tensor4d(Float32Array.from(allowed), [1, 1, m, m]);
}

/**
 * The sub-layer as a function of its input, with its kind's forward and rule. Inputs are one
 * example's tokens X [m, d] row-major and an optional allowed-keys mask [m, m] (1 = may attend).
 */
export class SublayerMap {
  constructor(
    readonly layer: AttentionSublayer,
    private readonly params: ParamSource,
    private readonly weights: Weights,
  ) {}

  /** The kind's forward on [b, m, d] -> [b, m, d_out] (tensors of the caller's tidy scope). */
  forward(x: tf.Tensor, allowed: tf.Tensor | null): tf.Tensor {
    return forwardLayers(x, [this.decl()], this.params, { allowed }).out;
  }

  /** The layer's parameters by role, as the rules read them (roles absent from the weights left out). */
  roleArrays(): Record<string, NamedArray> {
    const out: Record<string, NamedArray> = {};
    for (const [role, name] of Object.entries(this.layer.params)) {
      const w = this.weights.get(name);
      if (w !== undefined) out[role] = w;
    }
    return out;
  }

  /**
   * Every asked-for bound variant of the kind's rule at X.
   *
   * @throws as composeBounds (a rule rejecting its input).
   * @example map.bounds(x, 17, 16, null, ["t3-exact"])["t3-exact"]
   */
  bounds(
    x: ArrayLike<number>,
    m: number,
    d: number,
    allowed: Uint8Array | null,
    variants: readonly HeadVariant[],
  ): VariantValues {
    let trace: LayerTrace | null = null;
    tf.tidy(() => {
      const mask = allowedTensor(allowed, m);
      const r = forwardLayers(
        tf.tensor3d(Float32Array.from(x), [1, m, d]),
        [this.decl()],
        this.params,
        { allowed: mask },
      );
      trace = { layers: r.layers, mask: null, allowed: mask };
      for (const t of traceTensors(trace)) tf.keep(t);
    });
    const t = trace as unknown as LayerTrace;
    try {
      return composeBounds(this.weights, t, { variants })[0].layers[0].values;
    } finally {
      for (const tensor of traceTensors(t)) tensor.dispose();
    }
  }

  /**
   * The exact Jacobian of the sub-layer at X: rows = outputs (m d_out, row-major over [m, d_out]),
   * cols = inputs (m d), from batched vector-Jacobian products (one backward pass per chunk of
   * up to 256 one-hot cotangents).
   *
   * @returns row-major float64 [rows, cols].
   */
  jacobian(
    x: ArrayLike<number>,
    m: number,
    d: number,
    allowed: Uint8Array | null,
  ): { data: Float64Array; rows: number; cols: number } {
    const cols = m * d;
    const point = tf.tensor3d(Float32Array.from(x), [1, m, d]);
    const mask = allowedTensor(allowed, m);
    try {
      const dOut = tf.tidy(() => this.forward(point, mask).shape[2] as number);
      const rows = m * dOut;
      const data = new Float64Array(rows * cols);
      for (let start = 0; start < rows; start += 256) {
        const c = Math.min(256, rows - start);
        const g = tf.tidy(() => {
          const copies = tf.tile(point, [c, 1, 1]);
          const seeds = tf.reshape(oneHotFloat(tf.range(start, start + c, 1, "int32"), rows), [
            c,
            m,
            dOut,
          ]);
          return tf.grad((z: tf.Tensor) => tf.sum(tf.mul(this.forward(z, mask), seeds)))(copies);
        });
        data.set(g.dataSync(), start * cols);
        g.dispose();
      }
      return { data, rows, cols };
    } finally {
      point.dispose();
      mask?.dispose();
    }
  }

  /**
   * ||D Attn(X)||_2: the largest singular value of the dense Jacobian when m d <= denseLimit
   * (exact to float32 products), else thick-restart Lanczos on Df^T Df (an estimate from below,
   * src/lipschitz/truth/powerIteration.ts).
   */
  truth(
    x: ArrayLike<number>,
    m: number,
    d: number,
    allowed: Uint8Array | null,
    options: TruthOptions = {},
  ): TrueValue {
    if (m * d <= (options.denseLimit ?? 400)) {
      const j = this.jacobian(x, m, d, allowed);
      return {
        value: spectralNorm(j.data, j.rows, j.cols),
        method: "dense",
        converged: true,
        iterations: 0,
      };
    }
    const point = tf.tensor3d(Float32Array.from(x), [1, m, d]);
    const mask = allowedTensor(allowed, m);
    try {
      const r = powerIterationLipschitz((z) => this.forward(z, mask), point, {
        maxIterations: options.maxIterations ?? 1000,
        seed: options.seed ?? 0,
      });
      return {
        value: r.value,
        method: "lanczos",
        converged: r.converged,
        iterations: r.iterations,
      };
    } finally {
      point.dispose();
      mask?.dispose();
    }
  }

  private decl() {
    return {
      kind: this.layer.kind,
      name: this.layer.name,
      params: this.layer.params,
      settings: this.layer.settings,
    };
  }
}
