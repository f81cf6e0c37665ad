import { tf } from "../backend.ts";
import type { TransformerClassifier } from "../nn/model.ts";
import { disposeTrace } from "../nn/trace.ts";
import type { LayerReport } from "../lipschitz/compose.ts";
import { networkBounds, type BlockReport } from "../lipschitz/networkBounds.ts";
import type { HeadVariant } from "../lipschitz/rules/headTypes.ts";
import { checkVariants, defaultVariants, inRegistryOrder } from "../lipschitz/variants/index.ts";
import { TRUTH_METHOD, type PowerIterationResult } from "../lipschitz/truth/powerIteration.ts";
import { blockTruthAt, type BlockTruths } from "./blockTruths.ts";
import { networkLipschitz } from "../lipschitz/truth/inputJacobian.ts";
import { summarize, type Summary } from "../stats.ts";
import { InputError } from "../util/errors.ts";
import { logitRowProblem } from "../robustness/loss.ts";
import { rowStats } from "../softmax/rowStats.ts";
import { solveSecular } from "../softmax/sigma.ts";

export type * from "./analysisTypes.ts";
import type {
  BoundsAgainstTruth,
  TruthRecord,
  ConvergenceCount,
  ConvergenceSummary,
  BlockAnalysis,
  BoundsSummary,
  AttentionRowSample,
  AttentionMaps,
  Analysis,
  AnalysisPart,
  AnalyzeOptions,
  FloorSummary,
} from "./analysisTypes.ts";

/**
 * Counts of a record's estimates (non-null `converged`) and unconverged ones.
 *
 * @example convergenceCount({ iterations: [9, 1000, 0], residual: [3e-7, 2e-5, NaN], relativeChange: [0, 0, NaN], converged: [true, false, null] })
 * // { estimates: 2, unconverged: 1 }
 */
export function convergenceCount(record: TruthRecord): ConvergenceCount {
  let estimates = 0;
  let unconverged = 0;
  for (const c of record.converged) {
    if (c === null) continue;
    estimates++;
    if (!c) unconverged++;
  }
  return { estimates, unconverged };
}


/**
 * The composition floor at one input (docs/math.md section 3): the network bound's own
 * product of top-level factors with each block's bound replaced by the block's true value,
 * (product of the factors outside the blocks: embedding, embedding LayerNorm, final norm or
 * pooling, pooler, head) x prod_i L_i^true. Every bound that multiplies per-block bounds with
 * these factors is at least this value, and the network's true value is at most it (chain
 * rule). Block values are estimates from below, so it is one too.
 *
 * @param factors the example's `outside` factor (networkBounds: the product of its top-level
 *   layers other than the blocks).
 * @param blockTrue the block true values, in block order.
 * @returns the floor; NaN when a block value is missing (not computed).
 * @example compositionFloor({ outside: 6 }, [4, 5]) // 120
 */
export function compositionFloor(factors: { outside: number }, blockTrue: readonly number[]): number {
  if (blockTrue.length === 0 || !blockTrue.every(Number.isFinite)) return NaN;
  return blockTrue.reduce((p, v) => p * v, factors.outside);
}

// The records below hold one array per computed variant: their keys are the analysis's variants.
const emptyRecord = (variants: readonly HeadVariant[]): Record<HeadVariant, number[]> =>
  Object.fromEntries(variants.map((v) => [v, [] as number[]])) as Record<HeadVariant, number[]>;

/** The variants a record holds, in the registry's order (src/lipschitz/variants/). */
const variantsOf = (record: Partial<Record<HeadVariant, unknown>>): HeadVariant[] => inRegistryOrder(Object.keys(record));

function emptyBounds(variants: readonly HeadVariant[]): BoundsAgainstTruth {
  return { bounds: emptyRecord(variants), true: [], ratios: emptyRecord(variants) };
}

const emptyTruthRecord = (): TruthRecord => ({ iterations: [], residual: [], relativeChange: [], converged: [] });

/** Appends one estimate's record (or a "not computed" entry when est is null). */
function pushRecord(target: TruthRecord, est: PowerIterationResult | null): void {
  target.iterations.push(est ? est.iterations : 0);
  target.residual.push(est ? est.residual : NaN);
  target.relativeChange.push(est ? est.relativeChange : NaN);
  target.converged.push(est ? est.converged : null);
}

function pushValues(target: BoundsAgainstTruth, values: Record<HeadVariant, number>, truth: number): void {
  for (const v of variantsOf(target.bounds)) {
    target.bounds[v].push(values[v]);
    target.ratios[v].push(truth > 0 ? values[v] / truth : NaN);
  }
  target.true.push(truth);
}

/**
 * {@link summarize}, except that a sample of vacuous bounds only (every value Infinity: a layer
 * without a bound, such as L2 attention) is summarised as Infinity throughout.
 *
 * @throws RangeError when the sample is empty, or holds NaN or a mix of Infinity and finite values.
 */
function summarizeBound(values: number[], name: string): Summary {
  if (values.length > 0 && values.every((v) => v === Infinity)) {
    const inf = Infinity;
    return { count: values.length, mean: inf, min: inf, q1: inf, median: inf, q3: inf, max: inf };
  }
  return summarize(values, name);
}

function summarizeBounds(b: BoundsAgainstTruth): BoundsSummary {
  const finite = (xs: number[]) => xs.filter(Number.isFinite);
  // Ratios of vacuous bounds (all Infinity) stay Infinity; otherwise the finite ones count.
  const ratios = (xs: number[]) => (xs.length > 0 && xs.every((x) => x === Infinity) ? xs : finite(xs));
  const hasTruth = finite(b.true).length > 0;
  return {
    bounds: Object.fromEntries(variantsOf(b.bounds).map((v) => [v, summarizeBound(b.bounds[v], v)])) as Record<HeadVariant, Summary>,
    true: hasTruth ? summarize(finite(b.true), "true") : null,
    ratios: hasTruth
      ? (Object.fromEntries(variantsOf(b.ratios).map((v) => [v, summarizeBound(ratios(b.ratios[v].filter((x) => !Number.isNaN(x))), `${v} ratio`)])) as Record<HeadVariant, Summary>)
      : null,
  };
}

/** The {@link FloorSummary} of the inputs with a floor, or null when none has one. */
function summarizeFloor(network: BoundsAgainstTruth, floors: number[]): FloorSummary | null {
  const at = floors.flatMap((f, e) => (Number.isFinite(f) && f > 0 ? [e] : []));
  if (at.length === 0) return null;
  const withTruth = at.filter((e) => Number.isFinite(network.true[e]) && network.true[e] > 0);
  return {
    floor: summarize(at.map((e) => floors[e]), "composition floor"),
    boundOverFloor: Object.fromEntries(
      variantsOf(network.bounds).map((v) => [v, summarizeBound(at.map((e) => network.bounds[v][e] / floors[e]), `${v} bound / floor`)]),
    ) as Record<HeadVariant, Summary>,
    floorOverTrue: withTruth.length > 0 ? summarize(withTruth.map((e) => floors[e] / network.true[e]), "floor / true") : null,
  };
}

/**
 * Local Lipschitz analysis of a transformer classifier at the given inputs: for every input,
 * every block and every attention head, each bound variant of docs/math.md sections 2-3 beside
 * the true value and the ratio bound / true, the attention statistics that explain them
 * (mean and max sigma, mean p_(1), mean entropy), and the whole network's bounds beside its
 * exact local Lipschitz constant (the spectral norm of the C x D input Jacobian of the logits).
 * Block and head true values are estimates from below (Lanczos on Df^T Df, capped at
 * options.maxIterations products, converged when the residual test holds), each with its
 * {@link TruthRecord}; `convergence` counts the unconverged ones.
 *
 * @param model a ViT or text classifier (src/nn).
 * @param inputs ViT: float32 images [N, 28, 28, 1] or [N, 784] in the model's input range;
 *   text: int32 token ids [N, n] with options.mask.
 * @throws RangeError on an empty batch; InputError when the model's logits hold NaN or +Infinity
 *   or are -Infinity for every class (a -Infinity logit alone is allowed: a masked class);
 *   errors of the model on malformed inputs.
 */
export function analyze(model: TransformerClassifier, inputs: tf.Tensor, options: AnalyzeOptions = {}): Analysis {
  return finishAnalysis([analyzeExamples(model, inputs, options)], options);
}

/**
 * The per-input part of {@link analyze} for some of the inputs (every attention row kept, not
 * yet subsampled): what a worker computes on its slice. Each input's values depend only on
 * that input, so the parts of consecutive slices, joined by {@link finishAnalysis}, are the
 * analysis of all of them.
 *
 * @param inputs and options as {@link analyze} (options.onProgress counts this part's inputs).
 * @throws as {@link analyze}.
 * @example const part = analyzeExamples(model, tf.slice(images, 0, 8)); part.inputs // 8
 */
export function analyzeExamples(model: TransformerClassifier, inputs: tf.Tensor, options: AnalyzeOptions = {}): AnalysisPart {
  const count = inputs.shape[0];
  if (!count) throw new RangeError("inputs: expected at least one input");
  const truth = { network: true, blocks: true, heads: true, ...options.truth };
  const iteration = { maxIterations: options.maxIterations ?? 1000, tolerance: options.tolerance ?? 1e-6, seed: options.seed ?? 0 };
  const batchSize = options.batchSize ?? 16;
  const offset = options.inputOffset ?? 0;
  const variants = checkVariants(options.variants ?? defaultVariants(model.config.attention === "l2"), "analyze");
  const blocks: BlockAnalysis[] = [];
  const network = emptyBounds(variants);
  const floors: number[] = [];
  const outside: Record<string, number[]> = {};
  let inputSpace: "image" | "embedding" = "image";
  let boundSeconds = 0;
  let truthSeconds = 0;
  const allRows: { top1: number; top2: number; sigma: number }[] = [];
  const attentionMaps: AttentionMaps = { n: 0, maps: [] };
  const notes = new Set<string>();

  for (let start = 0; start < count; start += batchSize) {
    const size = Math.min(batchSize, count - start);
    const x = tf.slice(inputs, start, size);
    const mask = options.mask ? tf.slice(options.mask, start, size) : null;
    const { logits, trace } = model.forward(x, { trace: true, mask });
    const problem = logitProblem(logits.dataSync(), size, offset + start);
    logits.dispose();
    if (problem !== null) {
      disposeTrace(trace!);
      tf.dispose([x]);
      mask?.dispose();
      throw new InputError(problem);
    }
    try {
      collectAttention(trace!, start === 0, allRows, attentionMaps);
      const t0 = performance.now();
      const stage = options.onStage;
      const report = networkBounds(model, trace!, {
        mlp: options.mlp,
        variants,
        onLayer:
          stage === undefined
            ? undefined
            : (p) =>
                stage({ stage: "bounds", input: start + p.example + 1, inputs: count, done: p.layer, total: p.layers, unit: "layer", name: p.name, seconds: (performance.now() - t0) / 1000 }),
      });
      boundSeconds += (performance.now() - t0) / 1000;
      inputSpace = report.inputSpace;
      for (const ex of report.examples) collectNotes(ex.layers, notes);
      const t1 = performance.now();
      const netTrue = truth.network ? networkLipschitz(model, x, { mask: mask ?? undefined }) : null;
      if (netTrue !== null) stage?.({ stage: "network true value", input: start + size, inputs: count, done: 1, total: 1, unit: "block", name: "network", seconds: (performance.now() - t1) / 1000 });
      for (let e = 0; e < size; e++) {
        const ex = report.examples[e];
        pushValues(network, ex.network, netTrue ? netTrue[e] : NaN);
        const blockTrue: number[] = [];
        const blockStart = performance.now();
        ex.blocks.forEach((b, i) => {
          const { block: est, heads: headEsts } = blockTruthAt(model, trace!, i, e, mask, iteration, truth);
          pushBlock(blocks, i, b, est, headEsts, variants);
          blockTrue.push(est ? est.value : NaN);
          if (truth.blocks || truth.heads)
            stage?.({ stage: "true values", input: start + e + 1, inputs: count, done: i + 1, total: ex.blocks.length, unit: "block", name: `block ${i}${truth.blocks ? "" : " heads"}${truth.blocks && truth.heads ? " and heads" : ""}`, seconds: (performance.now() - blockStart) / 1000 });
        });
        floors.push(compositionFloor(ex, blockTrue));
        for (const layer of ex.layers)
          if (layer.shared !== null) (outside[layer.name] ??= []).push(layer.shared);
        options.onProgress?.(start + e + 1, count);
      }
      truthSeconds += (performance.now() - t1) / 1000;
    } finally {
      disposeTrace(trace!);
      x.dispose();
      mask?.dispose();
    }
  }
  return {
    inputs: count,
    inputSpace,
    blocks,
    network,
    compositionFloor: floors,
    outside,
    rows: allRows,
    attentionMaps,
    notes: [...notes],
    seconds: { bounds: boundSeconds, truth: truthSeconds },
  };
}

/**
 * Appends one input's values of block i to blocks[i] (created at the first input): its bounds
 * beside its true value, the estimate's record, its LayerNorm and MLP factors, and each head's
 * bounds, true value and attention statistics.
 */
function pushBlock(
  blocks: BlockAnalysis[],
  i: number,
  b: BlockReport,
  est: PowerIterationResult | null,
  headEsts: readonly (PowerIterationResult | null)[],
  variants: readonly HeadVariant[],
): void {
  if (!blocks[i])
    blocks[i] = {
      name: `block.${i}`,
      ...emptyBounds(variants),
      ...emptyTruthRecord(),
      heads: b.heads.map((_, h) => ({ head: h, ...emptyBounds(variants), ...emptyTruthRecord(), stats: { meanSigma: [], maxSigma: [], meanTop: [], meanEntropy: [] } })),
      ln1: [],
      ln2: [],
      mlpLocal: [],
      mlpRelaxed: [],
    };
  const target = blocks[i];
  pushValues(target, b.block, est ? est.value : NaN);
  pushRecord(target, est);
  target.ln1.push(b.ln1);
  target.ln2.push(b.ln2);
  target.mlpLocal.push(b.mlp.local);
  target.mlpRelaxed.push(b.mlp.relaxed);
  b.heads.forEach((hr, h) => {
    const headEst = headEsts[h];
    const head = target.heads[h];
    pushValues(head, hr.values, headEst ? headEst.value : NaN);
    pushRecord(head, headEst);
    head.stats.meanSigma.push(hr.stats.meanSigma);
    head.stats.maxSigma.push(hr.stats.maxSigma);
    head.stats.meanTop.push(hr.stats.meanTop);
    head.stats.meanEntropy.push(hr.stats.meanEntropy);
  });
}

/**
 * A part analysed without block and head true values (options.truth.blocks and .heads false),
 * completed with true values computed elsewhere ({@link blockTruths}, e.g. in worker threads,
 * block by block): each value, ratio, convergence record and the composition floor are what
 * {@link analyzeExamples} with those true values gives, bit for bit.
 *
 * @param part from analyzeExamples with truth { blocks: false, heads: false } (not modified).
 * @param truths covering blocks of the part's model, each at every input of the part.
 * @returns a new part.
 * @throws RangeError when a truth's input count or block index does not match the part.
 * @example withBlockTruths(analyzeExamples(model, x, { truth: { blocks: false, heads: false } }), [blockTruths(model, x, [0, 1], { truth })])
 */
export function withBlockTruths(part: AnalysisPart, truths: readonly BlockTruths[]): AnalysisPart {
  const out = structuredClone(part);
  const fill = (target: BoundsAgainstTruth & TruthRecord, e: number, est: PowerIterationResult | null) => {
    if (est === null) return;
    target.true[e] = est.value;
    for (const v of variantsOf(target.bounds)) target.ratios[v][e] = est.value > 0 ? target.bounds[v][e] / est.value : NaN;
    target.iterations[e] = est.iterations;
    target.residual[e] = est.residual;
    target.relativeChange[e] = est.relativeChange;
    target.converged[e] = est.converged;
  };
  for (const t of truths)
    t.blocks.forEach((i, k) => {
      const block = out.blocks[i];
      if (block === undefined) throw new RangeError(`withBlockTruths: the part has no block ${i}`);
      if (t.values[k].length !== out.inputs)
        throw new RangeError(`withBlockTruths: block ${i} has ${t.values[k].length} inputs, the part ${out.inputs}`);
      t.values[k].forEach((at, e) => {
        fill(block, e, at.block);
        at.heads.forEach((est, h) => fill(block.heads[h], e, est));
      });
    });
  // The composition floor from the block true values, as analyzeExamples forms it: the factors
  // outside the blocks (in the trace's order), times each block's true value.
  for (let e = 0; e < out.inputs; e++) {
    const outside = Object.values(out.outside).reduce((p, values) => p * values[e], 1);
    out.compositionFloor[e] = compositionFloor({ outside }, out.blocks.map((b) => b.true[e]));
  }
  return out;
}

/** Adds the `note` of every layer report's detail (recursively) to `notes`. */
function collectNotes(layers: readonly LayerReport[], notes: Set<string>): void {
  for (const l of layers) {
    const note = (l.detail as { note?: unknown } | undefined)?.note;
    if (typeof note === "string") notes.add(note);
    collectNotes(l.children, notes);
  }
}

/**
 * Why the logits [size, classes] of a batch define no class distribution, or null when they do.
 * A logit of -Infinity is allowed (a class the model rules out, as attack takes it,
 * robustness/loss.ts logitRowProblem): the bounds and true values are about the Jacobian, which
 * an additive -Infinity (a masked class's bias) leaves as it is, and analyze predicts nothing.
 * NaN and +Infinity are refused (broken or overflowing weights), and so is a row that is
 * -Infinity for every class (no class is left).
 *
 * @param first the inputs' index of the batch's first example (0-based), for the message.
 * @returns the one-line message naming the first 5 such inputs (1-based), or null.
 */
function logitProblem(logits: ArrayLike<number>, size: number, first: number): string | null {
  const classes = logits.length / size;
  const problems = Array.from({ length: size }, (_, e) => logitRowProblem(logits, classes, e));
  const name = (rows: number[]) =>
    `input${rows.length > 1 ? "s" : ""} ${rows.slice(0, 5).map((e) => first + e + 1).join(", ")}${rows.length > 5 ? ", ..." : ""}`;
  const broken = problems.flatMap((p, e) => (p !== null && p !== ALL_MINUS_INFINITY ? [e] : []));
  if (broken.length > 0)
    return `model: its logits are not finite at ${name(broken)}: the weights are broken or overflow (a diverged training run?), or those inputs hold NaN or Infinity (a logit of -Infinity alone is allowed: a class the model rules out)`;
  const empty = problems.flatMap((p, e) => (p === ALL_MINUS_INFINITY ? [e] : []));
  if (empty.length > 0)
    return `model: its logits are -Infinity for every class at ${name(empty)}: the model rules out every class (a masked class is allowed, but at least one must be left)`;
  return null;
}

/** logitRowProblem's answer for a row that rules out every class. */
const ALL_MINUS_INFINITY = "is -Infinity for every class";

/**
 * The analysis of consecutive parts of the inputs ({@link analyzeExamples}, in input order)
 * as one: per-input arrays concatenated, attention rows subsampled evenly to at most
 * options.maxAttentionRows, the first part's attention maps, seconds summed (compute time,
 * over every worker), summaries and convergence counts over all inputs. One part gives
 * exactly what {@link analyze} returns.
 *
 * @throws RangeError on no parts.
 * @example finishAnalysis([analyzeExamples(model, x0), analyzeExamples(model, x1)]).inputs
 */
export function finishAnalysis(parts: readonly AnalysisPart[], options: AnalyzeOptions = {}): Analysis {
  if (parts.length === 0) throw new RangeError("finishAnalysis: expected at least one part");
  const iteration = { maxIterations: options.maxIterations ?? 1000, tolerance: options.tolerance ?? 1e-6 };
  const blocks = parts[0].blocks.map((_, i) => concatBlock(parts.map((p) => p.blocks[i])));
  const network = concatBounds(parts.map((p) => p.network));
  const floors = concat(parts.map((p) => p.compositionFloor));
  const outside: Record<string, number[]> = {};
  for (const name of Object.keys(parts[0].outside)) outside[name] = concat(parts.map((p) => p.outside[name] ?? []));
  const allRows = parts.flatMap((p) => p.rows);
  const keep = options.maxAttentionRows ?? 5000;
  const stride = Math.max(1, allRows.length / keep);
  const sample: AttentionRowSample = { top1: [], top2: [], sigma: [], total: allRows.length };
  for (let k = 0; Math.floor(k * stride) < allRows.length && sample.top1.length < keep; k++) {
    const row = allRows[Math.floor(k * stride)];
    sample.top1.push(row.top1);
    sample.top2.push(row.top2);
    sample.sigma.push(row.sigma);
  }
  return {
    attentionRows: sample,
    attentionMaps: parts[0].attentionMaps,
    notes: [...new Set(parts.flatMap((p) => p.notes))],
    inputs: parts.reduce((a, p) => a + p.inputs, 0),
    variants: checkVariants(options.variants ?? variantsOf(parts[0].network.bounds), "analyze"),
    inputSpace: parts[0].inputSpace,
    blocks,
    network,
    compositionFloor: floors,
    outside,
    summary: { blocks: blocks.map(summarizeBounds), network: summarizeBounds(network), compositionFloor: summarizeFloor(network, floors) },
    seconds: {
      bounds: parts.reduce((a, p) => a + p.seconds.bounds, 0),
      truth: parts.reduce((a, p) => a + p.seconds.truth, 0),
    },
    convergence: summarizeConvergence(blocks, iteration),
  };
}

const concat = <T,>(lists: T[][]): T[] => ([] as T[]).concat(...lists);

function concatRecord(parts: Record<HeadVariant, number[]>[]): Record<HeadVariant, number[]> {
  return Object.fromEntries(variantsOf(parts[0]).map((v) => [v, concat(parts.map((p) => p[v]))])) as Record<HeadVariant, number[]>;
}

function concatBounds(parts: BoundsAgainstTruth[]): BoundsAgainstTruth {
  return { bounds: concatRecord(parts.map((p) => p.bounds)), true: concat(parts.map((p) => p.true)), ratios: concatRecord(parts.map((p) => p.ratios)) };
}

function concatTruth(parts: TruthRecord[]): TruthRecord {
  return {
    iterations: concat(parts.map((p) => p.iterations)),
    residual: concat(parts.map((p) => p.residual)),
    relativeChange: concat(parts.map((p) => p.relativeChange)),
    converged: concat(parts.map((p) => p.converged)),
  };
}

function concatBlock(parts: BlockAnalysis[]): BlockAnalysis {
  return {
    name: parts[0].name,
    ...concatBounds(parts),
    ...concatTruth(parts),
    heads: parts[0].heads.map((h, j) => ({
      head: h.head,
      ...concatBounds(parts.map((p) => p.heads[j])),
      ...concatTruth(parts.map((p) => p.heads[j])),
      stats: {
        meanSigma: concat(parts.map((p) => p.heads[j].stats.meanSigma)),
        maxSigma: concat(parts.map((p) => p.heads[j].stats.maxSigma)),
        meanTop: concat(parts.map((p) => p.heads[j].stats.meanTop)),
        meanEntropy: concat(parts.map((p) => p.heads[j].stats.meanEntropy)),
      },
    })),
    ln1: concat(parts.map((p) => p.ln1)),
    ln2: concat(parts.map((p) => p.ln2)),
    mlpLocal: concat(parts.map((p) => p.mlpLocal)),
    mlpRelaxed: concat(parts.map((p) => p.mlpRelaxed)),
  };
}

/** Totals of the block and head records, with the method and settings they were made with. */
function summarizeConvergence(
  blocks: BlockAnalysis[],
  iteration: { maxIterations: number; tolerance: number },
): ConvergenceSummary {
  const total = (counts: ConvergenceCount[]): ConvergenceCount => ({
    estimates: counts.reduce((a, c) => a + c.estimates, 0),
    unconverged: counts.reduce((a, c) => a + c.unconverged, 0),
  });
  const blockCounts = total(blocks.map(convergenceCount));
  const headCounts = total(blocks.flatMap((b) => b.heads.map(convergenceCount)));
  const records: TruthRecord[] = blocks.flatMap((b) => [b, ...b.heads]);
  return {
    method: TRUTH_METHOD,
    tolerance: iteration.tolerance,
    maxIterations: iteration.maxIterations,
    blocks: blockCounts,
    heads: headCounts,
    unconverged: blockCounts.unconverged + headCounts.unconverged,
    mostIterations: records.reduce((m, r) => r.iterations.reduce((a, i) => Math.max(a, i), m), 0),
  };
}

/**
 * Reads the attention probabilities of a trace back to JS: p_(1), p_(2) and exact sigma of
 * every real query row into `rows`, and (for the first batch) the maps of input 0. Rows are
 * appended input by input (then block, head, query row), so the order, and with it the
 * subsample {@link finishAnalysis} keeps, does not depend on how the inputs were batched or
 * sliced over workers.
 */
function collectAttention(
  trace: NonNullable<ReturnType<TransformerClassifier["forward"]>["trace"]>,
  firstBatch: boolean,
  rows: { top1: number; top2: number; sigma: number }[],
  maps: AttentionMaps,
): void {
  const mask = trace.mask ? trace.mask.dataSync() : null;
  const probabilities = trace.blocks.map((block) => {
    const [, heads, n] = block.attn.p.shape as [number, number, number, number];
    return { p: block.attn.p.dataSync(), heads, n };
  });
  if (firstBatch)
    for (const { p, heads, n } of probabilities) {
      maps.n = n;
      const layer: number[][] = [];
      for (let h = 0; h < heads; h++) layer.push(Array.from(p.subarray(h * n * n, (h + 1) * n * n), (v) => Math.round(v * 1e5) / 1e5));
      maps.maps.push(layer);
    }
  const b = trace.blocks[0]?.attn.p.shape[0] ?? 0;
  for (let e = 0; e < b; e++)
    for (const { p, heads, n } of probabilities)
      for (let h = 0; h < heads; h++)
        for (let i = 0; i < n; i++) {
          if (mask && !mask[e * n + i]) continue;
          const offset = ((e * heads + h) * n + i) * n;
          const st = rowStats(p, offset, n);
          rows.push({ top1: st.a, top2: st.b, sigma: solveSecular(st, p, offset) });
        }
}
