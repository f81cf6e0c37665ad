import { tf } from "../backend.ts";
import { multiHeadAttention, type AttentionParams } from "./attention.ts";
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
}

/** A block's parameters. */
export interface BlockParams {
  ln1: { gamma: tf.Tensor; beta: tf.Tensor };
  attn: AttentionParams;
  ln2: { gamma: tf.Tensor; beta: tf.Tensor };
  mlp: MlpParams;
}

/**
 * Creates block `i`'s parameters in `store` under `blocks.i.`: ln1.{gamma,beta} [d],
 * attn.{wq,bq,wk,bk,wv,bv,wo,bo} (W [d, d] Glorot uniform, b [d] zeros; bq/bk/bv only with
 * qkvBias), ln2.{gamma,beta} [d], mlp.{w1 [d, hidden], b1, w2 [hidden, d], b2}.
 */
export function addBlockParams(store: ParamStore, i: number, cfg: BlockConfig): void {
  const pre = `blocks.${i}`;
  const d = cfg.dModel;
  const sq = { kind: "glorot", fanIn: d, fanOut: d } as const;
  store.add(`${pre}.ln1.gamma`, [d], { kind: "ones" });
  store.add(`${pre}.ln1.beta`, [d], { kind: "zeros" });
  for (const m of ["q", "k", "v"]) {
    store.add(`${pre}.attn.w${m}`, [d, d], sq);
    if (cfg.qkvBias) store.add(`${pre}.attn.b${m}`, [d], { kind: "zeros" });
  }
  store.add(`${pre}.attn.wo`, [d, d], sq);
  store.add(`${pre}.attn.bo`, [d], { kind: "zeros" });
  store.add(`${pre}.ln2.gamma`, [d], { kind: "ones" });
  store.add(`${pre}.ln2.beta`, [d], { kind: "zeros" });
  store.add(`${pre}.mlp.w1`, [d, cfg.mlpHidden], {
    kind: "glorot",
    fanIn: d,
    fanOut: cfg.mlpHidden,
  });
  store.add(`${pre}.mlp.b1`, [cfg.mlpHidden], { kind: "zeros" });
  store.add(`${pre}.mlp.w2`, [cfg.mlpHidden, d], {
    kind: "glorot",
    fanIn: cfg.mlpHidden,
    fanOut: d,
  });
  store.add(`${pre}.mlp.b2`, [d], { kind: "zeros" });
}

/** Block `i`'s parameters from `store`. @throws Error naming a missing parameter. */
export function blockParams(store: ParamStore, i: number): BlockParams {
  const pre = `blocks.${i}`;
  const opt = (name: string) => (store.has(name) ? store.get(name) : undefined);
  return {
    ln1: { gamma: store.get(`${pre}.ln1.gamma`), beta: store.get(`${pre}.ln1.beta`) },
    attn: {
      wq: store.get(`${pre}.attn.wq`),
      wk: store.get(`${pre}.attn.wk`),
      wv: store.get(`${pre}.attn.wv`),
      wo: store.get(`${pre}.attn.wo`),
      bq: opt(`${pre}.attn.bq`),
      bk: opt(`${pre}.attn.bk`),
      bv: opt(`${pre}.attn.bv`),
      bo: store.get(`${pre}.attn.bo`),
    },
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
 * `${name}.ln1.gamma` etc. (Q/K/V biases named whether or not the weights hold them).
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
  const attnParams: Record<string, string> = {};
  for (const role of ["wq", "wk", "wv", "wo", "bq", "bk", "bv", "bo"])
    attnParams[role] = `${name}.attn.${role}`;
  const attn: TracedLayer = {
    kind: "attention",
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
    const a = multiHeadAttention(attnInput, p.attn, cfg.heads, allowed);
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
  const a = multiHeadAttention(x, p.attn, cfg.heads, allowed);
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
