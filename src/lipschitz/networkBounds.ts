import type { ModelConfig } from "../nn/config.ts";
import type { ForwardTrace } from "../nn/trace.ts";
import type { tf } from "../backend.ts";
import {
  HEAD_VARIANTS,
  inputNorms,
  type HeadVariant,
  type VariantValues,
} from "./rules/attentionHead.ts";
import type { MlpBound } from "./rules/mlp.ts";
import { ruleFor } from "./rules/table.ts";
import { modelWeightNorms, type Weights } from "./rules/weightNorms.ts";

/**
 * The walker: composes the layer rules (rules/table.ts) over a traced forward pass, in float64
 * on the JS side (docs/math.md sections 2-3; docs/design.md, Data flow).
 */

/** Attention statistics of one head on one example, over its real, live query rows. */
export interface AttentionStats {
  /** Number of rows the statistics are over (real query rows with at least one allowed key). */
  rows: number;
  /** Mean and max of exact sigma(P_i). */
  meanSigma: number;
  maxSigma: number;
  /** Mean of p_(1) and of the entropy of P_i (nats). */
  meanTop: number;
  meanEntropy: number;
}

/** One head on one example. */
export interface HeadReport {
  /** Bound per variant on the head's local Lipschitz constant. */
  values: VariantValues;
  stats: AttentionStats;
}

/** One block on one example. */
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
  blocks: BlockReport[];
  /** Embedding factor (ViT: ||patch.w||_2; text: 1, the input being the embedded sequence). */
  embedding: number;
  /** Final LayerNorm + pooling factor. */
  finalNorm: number;
  /** ||head.w||_2. */
  head: number;
  /** Whole-network bound per variant: embedding x blocks x final norm x head. */
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
}

/** A model (anything with its config and getWeights), or a config and a weights map. */
export type BoundSource =
  { config: ModelConfig; getWeights(): Weights } | { config: ModelConfig; weights: Weights };

function read(t: tf.Tensor): Float32Array {
  return t.dataSync() as Float32Array;
}

/**
 * Local Lipschitz bounds of every head, layer, block and of the whole network at each example
 * of a traced forward pass.
 *
 * @param source the model, or {config, weights} (pass the same weights Map across calls to
 *   reuse the cached weight norms).
 * @param trace from `model.forward(x, {trace: true})` or `forwardFromEmbeddings`; tensors are
 *   read, not disposed. Shapes: blocks' inputs [b, n, d], q/k/v [b, H, n, d_k], p [b, H, n, n],
 *   mlpPre [b, n, hidden], mask [b, n] or null.
 * @param options see {@link NetworkBoundsOptions}.
 * @returns per example: per block, per head every variant with attention statistics; per block
 *   the attention, LN, MLP and block bounds; the network bound per variant. Masks: padded keys
 *   (and, for causal text models, future keys) are masked; padded query rows are ordinary rows
 *   of each layer (they attend to the real keys), so layer bounds cover them; statistics use
 *   real rows only.
 * @throws Error naming a missing weight; RangeError when the trace does not match the config.
 */
export function networkBounds(
  source: BoundSource,
  trace: ForwardTrace,
  options: NetworkBoundsOptions = {},
): NetworkBounds {
  const config = source.config;
  const weights = "weights" in source ? source.weights : source.getWeights();
  const mlpChoice = options.mlp ?? "local";
  if (mlpChoice !== "local" && mlpChoice !== "relaxed")
    throw new RangeError(
      `networkBounds: options.mlp must be "local" or "relaxed", got "${String(mlpChoice)}"`,
    );
  const { dModel: d, heads: H, lnEps: eps } = config;
  if (trace.blocks.length !== config.blocks)
    throw new RangeError(
      `networkBounds: trace has ${trace.blocks.length} blocks, config ${config.blocks}`,
    );
  const norms = modelWeightNorms(weights, config);
  const [b, n, dTrace] = trace.embedding.shape;
  if (dTrace !== d)
    throw new RangeError(`networkBounds: trace width ${dTrace}, config dModel ${d}`);
  const dk = d / H;
  const causal = config.kind === "text" && config.causal;
  const mask = trace.mask === null ? null : read(trace.mask);

  const attentionHead = ruleFor("attentionHead");
  const attentionLayer = ruleFor("attention");
  const layerNorm = ruleFor("layerNorm");
  const mlpRule = ruleFor("mlp");
  const blockRule = ruleFor("block");
  const finalNorm = ruleFor("finalNorm");
  const headRule = ruleFor("head");
  const embedding =
    config.kind === "vit"
      ? ruleFor("patchEmbedding")(
          (weights.get("patch.w") ?? missing("patch.w")).data,
          config.patchSize * config.patchSize * config.channels,
          d,
        )
      : ruleFor("tokenEmbedding")();
  const headFactor = headRule((weights.get("head.w") ?? missing("head.w")).data, d, norms.classes);

  // Allowed keys and real rows per example.
  const allowedFor = (e: number): Uint8Array | undefined => {
    if (mask === null && !causal) return undefined;
    const a = new Uint8Array(n * n);
    for (let i = 0; i < n; i++)
      for (let j = 0; j < n; j++)
        a[i * n + j] = (mask === null || mask[e * n + j] !== 0) && (!causal || j <= i) ? 1 : 0;
    return a;
  };
  const realFor = (e: number): Uint8Array => {
    const r = new Uint8Array(n).fill(1);
    if (mask !== null) for (let i = 0; i < n; i++) r[i] = mask[e * n + i] !== 0 ? 1 : 0;
    return r;
  };

  const blockData = trace.blocks.map((bt) => ({
    attnInput: read(bt.attnInput),
    ln1Input: read(bt.ln1Input),
    ln2Input: read(bt.ln2Input),
    mlpPre: read(bt.mlpPre),
    q: read(bt.attn.q),
    k: read(bt.attn.k),
    v: read(bt.attn.v),
    p: read(bt.attn.p),
  }));
  const finalInput = read(trace.finalInput);

  const examples: ExampleReport[] = [];
  for (let e = 0; e < b; e++) {
    const allowed = allowedFor(e);
    const real = realFor(e);
    const blocks: BlockReport[] = [];
    for (let i = 0; i < config.blocks; i++) {
      const bd = blockData[i];
      const bn = norms.blocks[i];
      const x = bd.attnInput.subarray(e * n * d, (e + 1) * n * d);
      const xNorms = inputNorms(x, n, d);
      const heads: HeadReport[] = [];
      for (let h = 0; h < H; h++) {
        const off = (e * H + h) * n * dk;
        const r = attentionHead(
          {
            n,
            xNorms,
            q: bd.q.subarray(off, off + n * dk),
            k: bd.k.subarray(off, off + n * dk),
            v: bd.v.subarray(off, off + n * dk),
            p: bd.p.subarray((e * H + h) * n * n, (e * H + h + 1) * n * n),
            allowed,
          },
          bn.heads[h],
        );
        heads.push({ values: r.values, stats: attentionStats(r.rows, real) });
      }
      const attention = attentionLayer(
        heads.map((hr) => hr.values),
        bn.wo,
      );
      const ln1 = layerNorm(
        bd.ln1Input.subarray(e * n * d, (e + 1) * n * d),
        n,
        d,
        bn.ln1Gamma,
        eps,
      ).value;
      const ln2 = layerNorm(
        bd.ln2Input.subarray(e * n * d, (e + 1) * n * d),
        n,
        d,
        bn.ln2Gamma,
        eps,
      ).value;
      const mlp = mlpRule(
        bd.mlpPre.subarray(e * n * bn.hidden, (e + 1) * n * bn.hidden),
        n,
        d,
        bn.hidden,
        bn.w1,
        bn.w2,
        { w1: bn.w1Norm, w2: bn.w2Norm },
        { local: mlpChoice === "local" },
      );
      const block = blockRule({
        norm: config.norm,
        attention,
        ln1,
        ln2,
        mlp: mlpChoice === "local" ? mlp.local : mlp.relaxed,
      });
      blocks.push({ heads, attention, ln1, ln2, mlp, block });
    }
    const pooling = config.kind === "text" ? config.pooling : "cls";
    const fn = finalNorm(
      finalInput.subarray(e * n * d, (e + 1) * n * d),
      n,
      d,
      norms.normGamma,
      eps,
      pooling,
      real,
    );
    const network = {} as VariantValues;
    for (const name of HEAD_VARIANTS) {
      let v = embedding * fn * headFactor;
      for (const bl of blocks) v *= bl.block[name];
      network[name] = v;
    }
    examples.push({ blocks, embedding, finalNorm: fn, head: headFactor, network });
  }
  return {
    variants: HEAD_VARIANTS,
    inputSpace: config.kind === "vit" ? "image" : "embedding",
    mlpInBlock: mlpChoice,
    examples,
  };
}

function missing(name: string): never {
  throw new Error(`lipschitz rules: missing weight "${name}"`);
}

/**
 * Mean/max sigma, mean p_(1) and mean entropy over the rows that are real (real[i] nonzero)
 * and live (at least one allowed key). All zero when there is no such row.
 */
export function attentionStats(
  rows: { live: Uint8Array; exact: Float64Array; top: Float64Array; entropy: Float64Array },
  real?: ArrayLike<number | boolean>,
): AttentionStats {
  let count = 0;
  let sum = 0;
  let max = 0;
  let top = 0;
  let ent = 0;
  for (let i = 0; i < rows.live.length; i++) {
    if (!rows.live[i] || (real !== undefined && !real[i])) continue;
    count++;
    sum += rows.exact[i];
    max = Math.max(max, rows.exact[i]);
    top += rows.top[i];
    ent += rows.entropy[i];
  }
  const c = Math.max(count, 1);
  return { rows: count, meanSigma: sum / c, maxSigma: max, meanTop: top / c, meanEntropy: ent / c };
}
