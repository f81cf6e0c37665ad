import { tf } from "../backend.ts";
import type { TransformerClassifier } from "../nn/model.ts";
import { disposeTrace, type LayerTrace } from "../nn/trace.ts";
import type { HeadVariant, VariantValues } from "../lipschitz/rules/headTypes.ts";
import { checkVariants, variantNames } from "../lipschitz/variants/index.ts";
import { layerKind } from "../lipschitz/layers/index.ts";
import { constructedInputs } from "./construct.ts";
import { globalBounds, type GlobalBound } from "./globalBounds.ts";
import { evenlySpaced, RADIUS_MEASURE, scaleToRadius, selectTokens } from "./grid.ts";
import {
  findAttentionSublayer,
  SublayerMap,
  type AttentionSublayer,
  type TrueValue,
  type TruthOptions,
} from "./sublayer.ts";

/**
 * The radius and length sweeps of `attnlip radius` (docs/math.md section 6): one block's
 * attention sub-layer (sublayer.ts) at held-out inputs rescaled to each radius, and at
 * constructed inputs (construct.ts), with its true local value and every bound variant.
 */

/** Which inputs a point is at: the model's held-out inputs, or Castin-style constructed ones (one per head). */
export type InputSet = "held-out" | "constructed";

/** One measured point. */
export interface RadiusPoint {
  /** "radius": on the radius grid at full length; "length": a token subset at the fixed radius. */
  sweep: "radius" | "length";
  set: InputSet;
  /** Index of the held-out input, or the head the constructed input was built from. */
  input: number;
  /** Largest token norm of the measured tokens. */
  radius: number;
  /** Tokens measured. */
  n: number;
  true: TrueValue;
  /** Every asked-for variant's bound. */
  bounds: VariantValues;
}

/** Options of {@link radiusSweep}. */
export interface RadiusOptions {
  /** Block whose attention sub-layer is measured. */
  block: number;
  /** Radii (> 0) of the radius sweep. */
  radii: readonly number[];
  /** Token counts of the length sweep (may be empty). */
  lengths: readonly number[];
  /** The radius of the length sweep. */
  lengthRadius: number;
  /** Bound variants [all]. */
  variants?: readonly HeadVariant[];
  /** Include the constructed inputs (default true). */
  constructed?: boolean;
  truth?: TruthOptions;
  /** Called after each point. */
  onProgress?: (done: number, total: number) => void;
}

/** What {@link radiusSweep} returns. */
export interface RadiusResult {
  block: number;
  layer: AttentionSublayer;
  radiusMeasure: typeof RADIUS_MEASURE;
  variants: HeadVariant[];
  radii: number[];
  lengths: number[];
  lengthRadius: number;
  /** Tokens of the full inputs (the first held-out input's real tokens) and the width d. */
  tokens: number;
  d: number;
  inputs: { heldOut: number; constructed: number };
  /** Bounds that hold at every input (a kind's registered global bounds; none for dot-product attention). */
  globalBounds: GlobalBound[];
  points: RadiusPoint[];
  /** Inputs or lengths left out, and why. */
  notes: string[];
}

/** Per example of a trace: its real token positions and its allowed-keys mask [n, n] (null: all allowed). */
function exampleMasks(
  trace: LayerTrace,
  e: number,
  n: number,
): { rows: number[]; allowed: { data: Uint8Array; n: number } | null } {
  const rows: number[] = [];
  const m = trace.mask === null ? null : trace.mask.dataSync();
  for (let i = 0; i < n; i++) if (m === null || m[e * n + i] !== 0) rows.push(i);
  if (trace.allowed === null) return { rows, allowed: null };
  const a = trace.allowed.dataSync();
  const [ab, , an] = trace.allowed.shape as number[];
  const data = new Uint8Array(n * n);
  const ae = ab === 1 ? 0 : e;
  for (let i = 0; i < n; i++)
    for (let j = 0; j < n; j++)
      data[i * n + j] = a[(ae * an + (an === 1 ? 0 : i)) * n + j] !== 0 ? 1 : 0;
  return { rows, allowed: { data, n } };
}

/** Throws when options.block is not a block of the model or a radius is not finite and > 0. */
function checkBlockAndRadii(options: RadiusOptions, blocks: number): void {
  if (!Number.isInteger(options.block) || options.block < 0 || options.block >= blocks)
    throw new RangeError(`block must be an integer from 0 to ${blocks - 1}, got ${options.block}`);
  for (const r of [...options.radii, options.lengthRadius])
    if (!(r > 0) || !Number.isFinite(r))
      throw new RangeError(`radii must be finite and > 0, got ${r}`);
}

/**
 * The variants asked for, checked, or every variant the layer's kind computes: dot-product
 * attention's (the registry's), and its own (L2 attention: l2-dist, l2-cov, kim).
 */
function sweepVariants(kind: string, asked: readonly HeadVariant[] | undefined): HeadVariant[] {
  return checkVariants(
    asked ?? [...variantNames("dot"), ...(layerKind(kind).extraVariants ?? [])],
    "radius",
  );
}

/**
 * The measurements in order: the radius sweep (every real token, at each radius), then the length
 * sweep (len tokens at the length radius).
 */
function sweepPlan(
  options: RadiusOptions,
): { sweep: RadiusPoint["sweep"]; radius: number; len: number | null }[] {
  return [
    ...options.radii.map((radius) => ({ sweep: "radius" as const, radius, len: null })),
    ...options.lengths.map((len) => ({
      sweep: "length" as const,
      radius: options.lengthRadius,
      len,
    })),
  ];
}

/**
 * Sweeps the radius and the sequence length of one block's attention sub-layer.
 *
 * Radius sweep: each held-out input's tokens entering the sub-layer (real tokens only) are
 * scaled to each radius R (largest token norm = R, grid.ts), and each head's constructed input is
 * built at R. Length sweep: token subsets (the first token and evenly spaced others, grid.ts) of
 * the same inputs scaled to options.lengthRadius, and constructed inputs of that length.
 *
 * @param x the model's inputs (images [N, ...] or token ids [N, n]); not disposed.
 * @param mask text padding mask [N, n] or null.
 * @returns every point, the layer measured and the notes.
 * @throws RangeError on a block outside the model, a radius that is not finite and > 0, a
 *   length below 1 or above the full length, an unknown variant.
 * @example radiusSweep(model, x, null, { block: 0, radii: [1, 10], lengths: [5, 17], lengthRadius: 10 })
 */
export function radiusSweep(
  model: TransformerClassifier,
  x: tf.Tensor,
  mask: tf.Tensor | null,
  options: RadiusOptions,
): RadiusResult {
  checkBlockAndRadii(options, model.config.blocks);
  const { trace } = model.forward(x, { trace: true, mask });
  try {
    const { layer, input } = findAttentionSublayer(trace!, options.block);
    const variants = sweepVariants(layer.kind, options.variants);
    const [count, n, d] = input.shape as [number, number, number];
    for (const len of options.lengths)
      if (!Number.isInteger(len) || len < 1 || len > n)
        throw new RangeError(`lengths must be integers from 1 to ${n}, got ${len}`);
    const map = new SublayerMap(layer, model.params, model.getWeights());
    const params = map.roleArrays();
    const data = input.dataSync();
    const examples = Array.from({ length: count }, (_, e) => ({
      x: data.subarray(e * n * d, (e + 1) * n * d),
      ...exampleMasks(trace!, e, n),
    }));
    const heads = typeof layer.settings.heads === "number" ? layer.settings.heads : 1;
    const notes: string[] = [];
    let construct = options.constructed !== false;
    if (construct && params.wq === undefined) {
      construct = false;
      notes.push(`no constructed inputs: kind "${layer.kind}" has no query weights (role wq)`);
    }
    const tokens = examples[0].rows.length;
    const total =
      (count + (construct ? heads : 0)) * (options.radii.length + options.lengths.length);
    const points: RadiusPoint[] = [];
    const measure = (
      sweep: RadiusPoint["sweep"],
      set: InputSet,
      index: number,
      radius: number,
      xs: Float64Array,
      allowed: Uint8Array | null,
    ) => {
      const m = xs.length / d;
      points.push({
        sweep,
        set,
        input: index,
        radius,
        n: m,
        true: map.truth(xs, m, d, allowed, options.truth),
        bounds: map.bounds(xs, m, d, allowed, variants),
      });
      options.onProgress?.(points.length, total);
    };
    // The constructed inputs' mask: the first input's, over its first m real tokens (causal stays causal).
    const constructedMask = (m: number) =>
      selectTokens(examples[0].x, d, examples[0].rows.slice(0, m), examples[0].allowed).allowed;
    for (const { sweep, radius, len } of sweepPlan(options)) {
      examples.forEach((ex, e) => {
        if (len !== null && len > ex.rows.length) {
          notes.push(`length ${len}: input ${e} has ${ex.rows.length} real tokens; left out`);
          return;
        }
        const rows = len === null ? ex.rows : evenlySpaced(ex.rows, len);
        const sel = selectTokens(ex.x, d, rows, ex.allowed);
        measure(
          sweep,
          "held-out",
          e,
          radius,
          scaleToRadius(sel.x, rows.length, d, radius),
          sel.allowed,
        );
      });
      const m = len ?? tokens;
      if (construct && m <= tokens)
        for (const c of constructedInputs(params, heads, m, radius))
          measure(sweep, "constructed", c.head, radius, c.x, constructedMask(m));
    }
    return {
      block: options.block,
      layer,
      radiusMeasure: RADIUS_MEASURE,
      variants,
      radii: [...options.radii],
      lengths: [...options.lengths],
      lengthRadius: options.lengthRadius,
      tokens,
      d,
      inputs: { heldOut: count, constructed: construct ? heads : 0 },
      globalBounds: globalBounds(layer.kind, params, layer.settings, tokens),
      points,
      notes,
    };
  } finally {
    disposeTrace(trace);
  }
}
