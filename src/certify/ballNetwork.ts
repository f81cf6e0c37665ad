import type { ModelConfig } from "../nn/config.ts";
import type { NamedArray } from "../nn/params.ts";
import type { LayerTrace } from "../nn/trace.ts";
import { matMulInto } from "../lipschitz/linalg.ts";
import { weightSpectralNorm } from "../lipschitz/weightCache.ts";
import { ballLayer, chainFactor, type BallContext, type BallLayer } from "./ballLayers.ts";
import type { SigmaRule } from "./ballRules.ts";

/**
 * A whole classifier over a ball B(x, r) of its input (docs/math.md section 7): the input's own
 * map to the sequence entering the first traced layer (a ViT's patch embedding, a text model's
 * position embeddings), then the traced layers (ballLayers.ts), with one float64 forward pass
 * from x giving every layer's centre. L(x, r) = S_embed prod_k S_k(r_k) bounds ||D logits(y)||_2
 * for every y in the ball.
 */

/** The point certified: an image's pixels, or a text's token embeddings. */
export type BallInput =
  /** H*W*C pixels in (row, column, channel) order, as the model reads them. */
  | { kind: "image"; pixels: Float64Array }
  /** Token embeddings E = tok[ids], [n, d] row-major (the space attack moves in). */
  | { kind: "embedding"; tokens: Float64Array; n: number };

/** A classifier over the ball around one input. */
export interface BallNetwork {
  /** "image" or "embedding", as the input. */
  inputSpace: BallInput["kind"];
  /** Entries of the input the ball is over (H W C pixels, or n d embedding entries). */
  inputSize: number;
  /** The logits at x, float64 [classes]. */
  logits: Float64Array;
  /** ||D (sequence) / D x||: ||W_patch||_2 for a ViT (patches are disjoint), 1 for text. */
  embeddingFactor: number;
  /** The traced layers after the embedding, with their centres. */
  layers: readonly BallLayer[];
  /**
   * L(x, r): a bound of ||D logits(y)||_2 for every y with ||y - x||_2 <= r, r >= 0 in input units;
   * non-decreasing in r; `rule` "dist" (probability boxes) or "half" (softmax norm 1/2).
   */
  lipschitz(r: number, rule: SigmaRule): number;
}

function weight(weights: ReadonlyMap<string, NamedArray>, name: string): NamedArray {
  const w = weights.get(name);
  if (w === undefined) throw new Error(`certify: missing weight "${name}"`);
  return w;
}

/** The real rows [n] and allowed keys [n, n] of the trace's first example (undefined: none masked). */
function masksOf(trace: LayerTrace, n: number): { real?: Uint8Array; allowed?: Uint8Array } {
  const out: { real?: Uint8Array; allowed?: Uint8Array } = {};
  if (trace.mask !== null) {
    const m = trace.mask.dataSync();
    out.real = Uint8Array.from(m.subarray(0, n), (v) => (v !== 0 ? 1 : 0));
  }
  if (trace.allowed !== null) {
    const a = trace.allowed.dataSync();
    const [, , an, cols] = trace.allowed.shape as [number, number, number, number];
    if (cols !== n)
      throw new RangeError(`certify: the trace's mask has ${cols} keys, the input ${n} tokens`);
    const rows = new Uint8Array(n * n);
    for (let i = 0; i < n; i++) {
      const ai = an === 1 ? 0 : i;
      for (let j = 0; j < n; j++) rows[i * n + j] = a[ai * n + j] !== 0 ? 1 : 0;
    }
    out.allowed = rows;
  }
  return out;
}

/** A ViT's sequence [N + 1, d] from pixels (src/nn/vit.ts): [CLS; patches W + b] + pos. */
function imageSequence(
  config: ModelConfig,
  weights: ReadonlyMap<string, NamedArray>,
  pixels: Float64Array,
) {
  if (config.kind !== "vit") throw new RangeError("certify: image inputs need a ViT");
  const { imageSize: s, channels: c, patchSize: p, dModel: d } = config;
  if (pixels.length !== s * s * c)
    throw new RangeError(`certify: expected ${s * s * c} pixels, got ${pixels.length}`);
  const g = s / p;
  const N = g * g;
  const dim = p * p * c;
  const patches = new Float64Array(N * dim);
  for (let gy = 0; gy < g; gy++)
    for (let gx = 0; gx < g; gx++)
      for (let py = 0; py < p; py++)
        for (let px = 0; px < p; px++)
          for (let ch = 0; ch < c; ch++)
            patches[(gy * g + gx) * dim + (py * p + px) * c + ch] =
              pixels[((gy * p + py) * s + gx * p + px) * c + ch];
  const w = weight(weights, "patch.w");
  const b = weights.get("patch.b");
  const tokens = new Float64Array(N * d);
  matMulInto(patches, w.data, tokens, N, dim, d);
  const cls = weight(weights, "cls").data;
  const pos = weight(weights, "pos").data;
  const seq = new Float64Array((N + 1) * d);
  for (let i = 0; i <= N; i++)
    for (let k = 0; k < d; k++)
      seq[i * d + k] =
        (i === 0 ? cls[k] : tokens[(i - 1) * d + k] + (b === undefined ? 0 : b.data[k])) +
        pos[i * d + k];
  return { seq, n: N + 1, factor: weightSpectralNorm(w.data, dim, d) };
}

/** A text model's sequence [n, d]: E + pos[0..n) (+ type[0]), src/nn/textClassifier.ts. */
function textSequence(
  config: ModelConfig,
  weights: ReadonlyMap<string, NamedArray>,
  tokens: Float64Array,
  n: number,
) {
  if (config.kind !== "text") throw new RangeError("certify: token embeddings need a text model");
  const d = config.dModel;
  if (tokens.length !== n * d)
    throw new RangeError(
      `certify: expected ${n} x ${d} token embeddings, got ${tokens.length} values`,
    );
  const pos = weight(weights, "pos").data;
  const type = config.tokenTypes !== undefined ? weight(weights, "type").data : null;
  const seq = new Float64Array(n * d);
  for (let i = 0; i < n; i++)
    for (let k = 0; k < d; k++)
      seq[i * d + k] = tokens[i * d + k] + pos[i * d + k] + (type === null ? 0 : type[k]);
  return { seq, n, factor: 1 };
}

/**
 * The classifier over the ball around one input: a float64 forward pass from the input through
 * the traced layers (centres of every layer's ball), and L(x, r) from their rules.
 *
 * @param config the model's config; @param weights its weights (model.getWeights()).
 * @param trace a trace of the model on this one input (batch 1): its layer list and masks.
 * @param input the pixels or token embeddings (the trace's input, in float64).
 * @param cache weight quantities kept across inputs (one Map per model; pass a new Map first).
 * @param options.onLayer called after each top-level layer's forward pass (k of K, its name).
 * @returns the {@link BallNetwork}.
 * @throws InputError naming a layer whose kind has no over-the-ball rule; RangeError on an
 *   input that does not fit the model or a trace of another model; Error on a missing weight.
 * @example ballNetwork(model.config, weights, trace, { kind: "image", pixels }, new Map()).lipschitz(0.01, "dist")
 */
export function ballNetwork(
  config: ModelConfig,
  weights: ReadonlyMap<string, NamedArray>,
  trace: LayerTrace,
  input: BallInput,
  cache: Map<string, unknown>,
  options: { onLayer?: (done: number, total: number, name: string) => void } = {},
): BallNetwork {
  const [embedding, ...rest] = trace.layers;
  const expected = input.kind === "image" ? "patchEmbedding" : "tokenEmbedding";
  if (embedding?.kind !== expected)
    throw new RangeError(
      `certify: an ${input.kind} input needs a trace that starts with a ${expected}, got ${embedding?.kind ?? "no layer"}`,
    );
  const start =
    input.kind === "image"
      ? imageSequence(config, weights, input.pixels)
      : textSequence(config, weights, input.tokens, input.n);
  const ctx: BallContext = { weights, cache, ...masksOf(trace, start.n) };
  const layers: BallLayer[] = [];
  let cur: { out: Float64Array; rows: number; width: number } = {
    out: start.seq,
    rows: start.n,
    width: config.dModel,
  };
  for (const layer of rest) {
    const built = ballLayer(layer, cur.out, cur.rows, cur.width, ctx);
    layers.push(built);
    cur = built;
    options.onLayer?.(layers.length, rest.length, layer.name);
  }
  if (cur.rows !== 1 || cur.width !== config.classes)
    throw new RangeError(
      `certify: the traced layers end in [${cur.rows}, ${cur.width}], not the ${config.classes} logits`,
    );
  const factor = start.factor;
  return {
    inputSpace: input.kind,
    inputSize: input.kind === "image" ? input.pixels.length : input.tokens.length,
    logits: cur.out,
    embeddingFactor: factor,
    layers,
    lipschitz(r, rule) {
      if (!(r >= 0) || !Number.isFinite(r))
        throw new RangeError(`certify: radius must be finite and >= 0, got ${r}`);
      return factor * chainFactor(layers, factor * r, rule);
    },
  };
}
