import { tf } from "../backend.ts";
import { multiHeadAttention, type AttentionParams, type AttentionResult } from "./attention.ts";
import { l2MultiHeadAttention, type L2AttentionParams } from "./l2Attention.ts";
import { layerNorm } from "./layerNorm.ts";
import { mlp, type MlpParams } from "./mlp.ts";
import type { ParamStore } from "./params.ts";
import type { Activation } from "./gelu.ts";
import type { BlockTrace, TracedLayer } from "./trace.ts";

/** Shape settings a block needs (a subset of the model config). */
export interface BlockConfig {
  dModel: number;
  heads: number;
  mlpHidden: number;
  qkvBias: boolean;
  norm: "pre" | "post";
  lnEps: number;
  dropout: number;
  /** The MLP activation (default "gelu-tanh"). */
  activation?: Activation;
  /** Attention scores: "dot" (default) or "l2" (tied W_Q = W_K; src/nn/l2Attention.ts). */
  attention?: "dot" | "l2";
}

/** A block's parameters (attn: L2AttentionParams, without wk and bk, in an L2-attention block). */
export interface BlockParams {
  ln1: { gamma: tf.Tensor; beta: tf.Tensor };
  attn: AttentionParams | L2AttentionParams;
  ln2: { gamma: tf.Tensor; beta: tf.Tensor };
  mlp: MlpParams;
}

/**
 * Creates block `i`'s parameters in `store` under `blocks.i.`: ln1.{gamma,beta} [d],
 * attn.{wq,bq,wk,bk,wv,bv,wo,bo} (W [d, d] Glorot uniform, b [d] zeros; bq/bk/bv only with
 * qkvBias; L2 attention has no wk, bk nor bq: W_Q serves as the key's too, and only bv with
 * qkvBias, src/nn/l2Attention.ts),
 * ln2.{gamma,beta} [d], mlp.{w1 [d, hidden], b1, w2 [hidden, d], b2}. Roles: the W "weight",
 * the b "bias", the LayerNorms' "norm".
 */
export function addBlockParams(store: ParamStore, i: number, cfg: BlockConfig): void {
  const pre = `blocks.${i}`;
  const d = cfg.dModel;
  const sq = { kind: "glorot", fanIn: d, fanOut: d } as const;
  store.add(`${pre}.ln1.gamma`, [d], { kind: "ones" }, "norm");
  store.add(`${pre}.ln1.beta`, [d], { kind: "zeros" }, "norm");
  const l2 = cfg.attention === "l2";
  for (const m of l2 ? ["q", "v"] : ["q", "k", "v"]) {
    store.add(`${pre}.attn.w${m}`, [d, d], sq, "weight");
    // L2 attention takes no query bias (it cancels in the scores; Kim et al.'s value map has none).
    if (cfg.qkvBias && !(l2 && m === "q"))
      store.add(`${pre}.attn.b${m}`, [d], { kind: "zeros" }, "bias");
  }
  store.add(`${pre}.attn.wo`, [d, d], sq, "weight");
  store.add(`${pre}.attn.bo`, [d], { kind: "zeros" }, "bias");
  store.add(`${pre}.ln2.gamma`, [d], { kind: "ones" }, "norm");
  store.add(`${pre}.ln2.beta`, [d], { kind: "zeros" }, "norm");
  store.add(
    `${pre}.mlp.w1`,
    [d, cfg.mlpHidden],
    {
      kind: "glorot",
      fanIn: d,
      fanOut: cfg.mlpHidden,
    },
    "weight",
  );
  store.add(`${pre}.mlp.b1`, [cfg.mlpHidden], { kind: "zeros" }, "bias");
  store.add(
    `${pre}.mlp.w2`,
    [cfg.mlpHidden, d],
    {
      kind: "glorot",
      fanIn: cfg.mlpHidden,
      fanOut: d,
    },
    "weight",
  );
  store.add(`${pre}.mlp.b2`, [d], { kind: "zeros" }, "bias");
}

/**
 * Block `i`'s parameters from `store`: an L2-attention block's (no `attn.wk`) when the store
 * has no `blocks.i.attn.wk`.
 *
 * @throws Error naming a missing parameter.
 */
export function blockParams(store: ParamStore, i: number): BlockParams {
  const pre = `blocks.${i}`;
  const opt = (name: string) => (store.has(name) ? store.get(name) : undefined);
  const shared = {
    wq: store.get(`${pre}.attn.wq`),
    wv: store.get(`${pre}.attn.wv`),
    wo: store.get(`${pre}.attn.wo`),
    bq: opt(`${pre}.attn.bq`),
    bv: opt(`${pre}.attn.bv`),
    bo: store.get(`${pre}.attn.bo`),
  };
  return {
    ln1: { gamma: store.get(`${pre}.ln1.gamma`), beta: store.get(`${pre}.ln1.beta`) },
    attn: store.has(`${pre}.attn.wk`)
      ? { ...shared, wk: store.get(`${pre}.attn.wk`), bk: opt(`${pre}.attn.bk`) }
      : shared,
    ln2: { gamma: store.get(`${pre}.ln2.gamma`), beta: store.get(`${pre}.ln2.beta`) },
    mlp: {
      w1: store.get(`${pre}.mlp.w1`),
      b1: store.get(`${pre}.mlp.b1`),
      w2: store.get(`${pre}.mlp.w2`),
      b2: store.get(`${pre}.mlp.b2`),
    },
  };
}

/** Options of {@link transformerBlock}. */
export interface BlockOptions {
  /** Attention mask broadcastable to [b, heads, n, n] (mask.ts), or null. */
  allowed?: tf.Tensor | null;
  /** Apply dropout (rate cfg.dropout) to each sub-layer output. */
  training?: boolean;
  /** The block's name in the trace and the prefix of its parameter names (default "blocks.0"). */
  name?: string;
}

/**
 * A block's output [b, n, d] with everything the trace records: `trace`, a view of its tensors,
 * and `layer`, the same tensors as one traced composite (src/nn/trace.ts).
 */
export type BlockResult = { out: tf.Tensor; trace: BlockTrace; layer: TracedLayer };

/**
 * The traced layer of a block from its tensors: a "sequence" of residual branches and
 * LayerNorms in forward order. Pre-LN: [residual [ln1, attn], residual [ln2, mlp]]; post-LN:
 * [residual [attn], ln1, residual [mlp], ln2] (docs/math.md section 3). Parameter names are
 * `${name}.ln1.gamma` etc. (Q/K/V biases named whether or not the weights hold them). The
 * attention entry is of kind "attention", or "l2Attention" (roles without wk, bk) when
 * cfg.attention is "l2".
 *
 * @example blockLayer("blocks.0", cfg, r.trace).children?.length // 2 (pre-LN) or 4 (post-LN)
 */
export function blockLayer(name: string, cfg: BlockConfig, t: BlockTrace): TracedLayer {
  const ln = (which: "ln1" | "ln2", input: tf.Tensor): TracedLayer => ({
    kind: "layerNorm",
    name: `${name}.${which}`,
    input,
    params: { gamma: `${name}.${which}.gamma`, beta: `${name}.${which}.beta` },
    settings: { eps: cfg.lnEps },
  });
  const l2 = cfg.attention === "l2";
  const attnParams: Record<string, string> = {};
  for (const role of l2
    ? ["wq", "wv", "wo", "bv", "bo"]
    : ["wq", "wk", "wv", "wo", "bq", "bk", "bv", "bo"])
    attnParams[role] = `${name}.attn.${role}`;
  const attn: TracedLayer = {
    kind: l2 ? "l2Attention" : "attention",
    name: `${name}.attn`,
    input: t.attnInput,
    params: attnParams,
    extras: { ...t.attn },
    settings: { heads: cfg.heads },
  };
  const mlpLayer: TracedLayer = {
    kind: "mlp",
    name: `${name}.mlp`,
    input: t.mlpInput,
    params: {
      w1: `${name}.mlp.w1`,
      b1: `${name}.mlp.b1`,
      w2: `${name}.mlp.w2`,
      b2: `${name}.mlp.b2`,
    },
    extras: { pre: t.mlpPre },
    settings: { activation: cfg.activation ?? "gelu-tanh" },
  };
  const residual = (which: string, input: tf.Tensor, children: TracedLayer[]): TracedLayer => ({
    kind: "residual",
    name: `${name}.${which}`,
    input,
    params: {},
    children,
  });
  const children =
    cfg.norm === "pre"
      ? [
          residual("attnResidual", t.input, [ln("ln1", t.ln1Input), attn]),
          residual("mlpResidual", t.ln2Input, [ln("ln2", t.ln2Input), mlpLayer]),
        ]
      : [
          residual("attnResidual", t.input, [attn]),
          ln("ln1", t.ln1Input),
          residual("mlpResidual", t.mlpInput, [mlpLayer]),
          ln("ln2", t.ln2Input),
        ];
  return { kind: "sequence", name, input: t.input, params: {}, children };
}

/**
 * The block's attention sub-layer: dot-product ({@link multiHeadAttention}) or, with
 * cfg.attention "l2", L2 ({@link l2MultiHeadAttention}).
 *
 * @throws RangeError when an L2 block gets a key weight or a query bias, or a dot-product block
 *   no key weight.
 */
export function blockAttention(
  x: tf.Tensor,
  p: AttentionParams | L2AttentionParams,
  cfg: Pick<BlockConfig, "heads" | "attention">,
  allowed: tf.Tensor | null,
): AttentionResult {
  const l2 = cfg.attention === "l2";
  if (l2 !== !("wk" in p))
    throw new RangeError(
      `block: ${l2 ? "an L2-attention block takes no key weight wk" : "a dot-product attention block needs a key weight wk"}`,
    );
  if (l2 && "bq" in p && p.bq !== undefined)
    throw new RangeError(
      "block: an L2-attention block takes no query bias bq (it cancels in the scores, and Kim et al.'s value map X W_Q W_Q^T W_V has none)",
    );
  return l2
    ? l2MultiHeadAttention(x, p, cfg.heads, allowed)
    : multiHeadAttention(x, p as AttentionParams, cfg.heads, allowed);
}

/**
 * One transformer block. Pre-LN (Xiong et al. 2020): y = x + attn(LN1(x)), out = y + mlp(LN2(y)).
 * Post-LN (Vaswani et al. 2017): y = LN1(x + attn(x)), out = LN2(y + mlp(y)).
 * docs/math.md section 3 composes their bounds from the sub-layer inputs returned in `trace`.
 *
 * @param x float32 [b, n, d].
 * @returns out float32 [b, n, d], the block's trace tensors and its traced layer
 *   ({@link blockLayer}; tensors not kept: wrap in tidy and keep what you need).
 * @throws RangeError on shape mismatches.
 */
export function transformerBlock(
  x: tf.Tensor,
  p: BlockParams,
  cfg: BlockConfig,
  options: BlockOptions = {},
): BlockResult {
  const allowed = options.allowed ?? null;
  const drop = (t: tf.Tensor) =>
    options.training && cfg.dropout > 0 ? tf.dropout(t, cfg.dropout) : t;
  const ln1 = (t: tf.Tensor) => layerNorm(t, p.ln1.gamma, p.ln1.beta, cfg.lnEps);
  const ln2 = (t: tf.Tensor) => layerNorm(t, p.ln2.gamma, p.ln2.beta, cfg.lnEps);
  if (cfg.norm === "pre") {
    const attnInput = ln1(x);
    const a = blockAttention(attnInput, p.attn, cfg, allowed);
    const mid = tf.add(x, drop(a.out));
    const mlpInput = ln2(mid);
    const m = mlp(mlpInput, p.mlp, cfg.activation);
    const out = tf.add(mid, drop(m.out));
    const { q, k, v, p: probs } = a;
    const trace: BlockTrace = {
      input: x,
      ln1Input: x,
      attnInput,
      ln2Input: mid,
      mlpInput,
      mlpPre: m.h,
      attn: { q, k, v, p: probs },
    };
    return { out, trace, layer: blockLayer(options.name ?? "blocks.0", cfg, trace) };
  }
  const a = blockAttention(x, p.attn, cfg, allowed);
  const ln1Input = tf.add(x, drop(a.out));
  const mlpInput = ln1(ln1Input);
  const m = mlp(mlpInput, p.mlp, cfg.activation);
  const ln2Input = tf.add(mlpInput, drop(m.out));
  const out = ln2(ln2Input);
  const { q, k, v, p: probs } = a;
  const trace: BlockTrace = {
    input: x,
    ln1Input,
    attnInput: x,
    ln2Input,
    mlpInput,
    mlpPre: m.h,
    attn: { q, k, v, p: probs },
  };
  return { out, trace, layer: blockLayer(options.name ?? "blocks.0", cfg, trace) };
}
