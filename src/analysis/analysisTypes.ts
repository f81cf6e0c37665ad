import type { tf } from "../backend.ts";
import type { NetworkBoundsOptions } from "../lipschitz/networkBounds.ts";
import type { HeadVariant } from "../lipschitz/rules/headTypes.ts";
import type { Summary } from "../stats.ts";

/**
 * What an analysis holds (analyze.ts computes it, files.ts writes it, table.ts prints it):
 * types only.
 */

/** Per-input arrays of every bound variant, the true value and the ratios bound / true. */
export interface BoundsAgainstTruth {
  /** bounds[variant][input]: the bound on the local Lipschitz constant at that input. */
  bounds: Record<HeadVariant, number[]>;
  /**
   * true[input]: the true local Lipschitz constant (exact input Jacobian for the network;
   * a Lanczos (Krylov power iteration) estimate from below for blocks and heads, with its
   * {@link TruthRecord}). NaN when not computed.
   */
  true: number[];
  /** ratios[variant][input] = bound / true (NaN when the true value was not computed). */
  ratios: Record<HeadVariant, number[]>;
}

/** Attention statistics of one head, per input (over real query rows). */
export interface HeadAttentionStats {
  meanSigma: number[];
  maxSigma: number[];
  meanTop: number[];
  meanEntropy: number[];
}

/**
 * How each estimated true value of a block or head was made, per input (docs/math.md section 5
 * "True values"): the method is TRUTH_METHOD (lipschitz/truth/powerIteration.ts); see powerIterationLipschitz for what
 * `converged` guarantees.
 */
export interface TruthRecord {
  /** Products with Df^T Df (one JVP + one VJP each) per input; 0 when not computed. */
  iterations: number[];
  /** Relative residual ||A u - lambda u|| / lambda per input (A = Df^T Df); NaN when not computed. */
  residual: number[];
  /** Last relative change of the value (informative only); NaN when not computed. */
  relativeChange: number[];
  /** Whether the residual test held per input; null when not computed. */
  converged: (boolean | null)[];
}

/** Estimates computed, and how many of them did not converge (the cap came first). */
export interface ConvergenceCount {
  estimates: number;
  unconverged: number;
}

/** How the block and head true values were estimated, and how many did not converge. */
export interface ConvergenceSummary {
  /** TRUTH_METHOD (lipschitz/truth/powerIteration.ts). */
  method: string;
  /** Residual tolerance and cap on products per estimate. */
  tolerance: number;
  maxIterations: number;
  /** Over all blocks and inputs. */
  blocks: ConvergenceCount;
  /** Over all heads, blocks and inputs. */
  heads: ConvergenceCount;
  /** blocks.unconverged + heads.unconverged. */
  unconverged: number;
  /** Most products any estimate used (0 when none was computed). */
  mostIterations: number;
}

/** One attention head of one block; its true values are estimates with their {@link TruthRecord}. */
export interface HeadAnalysis extends BoundsAgainstTruth, TruthRecord {
  head: number;
  stats: HeadAttentionStats;
}

/** One transformer block: its bounds against estimated true values, and its heads. */
export interface BlockAnalysis extends BoundsAgainstTruth, TruthRecord {
  name: string;
  heads: HeadAnalysis[];
  /** LayerNorm and MLP factors per input. */
  ln1: number[];
  ln2: number[];
  mlpLocal: number[];
  mlpRelaxed: number[];
}

/**
 * One step of one stage of an analysis ({@link AnalyzeOptions.onStage}): `done` of `total`
 * units of `stage` at input `input` (1-based among this call's inputs, of `inputs`), and the
 * seconds the stage has taken so far at this input (for the batch's bounds: at this batch).
 */
export interface StageProgress {
  /** "true values": Lanczos estimates of a block's (and its heads') local constant, per block. */
  stage: "bounds" | "network true value" | "true values";
  input: number;
  inputs: number;
  done: number;
  total: number;
  /** What is counted: "layer" (bounds: the top-level layers, a whole block being one) or "block". */
  unit: "layer" | "block";
  /** The layer or block just finished, e.g. "blocks.3" or "block 3 and heads". */
  name: string;
  seconds: number;
}

/** Medians and quartiles of bounds, true values and ratios. */
export interface BoundsSummary {
  bounds: Record<HeadVariant, Summary>;
  true: Summary | null;
  ratios: Record<HeadVariant, Summary> | null;
}

/**
 * A sample of attention rows (every head, layer and input, subsampled evenly to at most
 * `maxAttentionRows`): p_(1), p_(2) and exact sigma of each row, for plots of sigma against
 * p_(1) and of their distributions. Padded query rows are left out.
 */
export interface AttentionRowSample {
  top1: number[];
  top2: number[];
  sigma: number[];
  /** Rows seen in all, before subsampling. */
  total: number;
}

/** Attention probabilities of the first input: maps[block][head] is an n x n row-major array. */
export interface AttentionMaps {
  n: number;
  maps: number[][][];
}

/** The result of analyze (analyze.ts). */
export interface Analysis {
  inputs: number;
  variants: readonly HeadVariant[];
  /** What the network's constant is with respect to: image pixels (ViT) or the embedded sequence (text). */
  inputSpace: "image" | "embedding";
  blocks: BlockAnalysis[];
  network: BoundsAgainstTruth;
  /**
   * The composition floor per input (analyze.ts compositionFloor); NaN where the block true
   * values were not computed.
   */
  compositionFloor: number[];
  /**
   * Each top-level layer outside the blocks (embedding, embedding.norm, norm or pool, pooler,
   * head) by name: its factor per input, the same for every variant. Their product times the
   * blocks' bounds is the network bound.
   */
  outside: Record<string, number[]>;
  summary: {
    blocks: BoundsSummary[];
    network: BoundsSummary;
    compositionFloor: FloorSummary | null;
  };
  /**
   * Why some bounds are Infinity, the vacuous bound (e.g. L2 attention's L2_NO_BOUND, src/lipschitz/layers/l2Attention.ts):
   * the distinct `note`s of the layer rules' details; empty when every rule bounded its layer.
   */
  notes: string[];
  /** Seconds spent: bounds, true values. */
  seconds: { bounds: number; truth: number };
  /** How the block and head true values were estimated; unconverged counts. */
  convergence: ConvergenceSummary;
  attentionRows: AttentionRowSample;
  attentionMaps: AttentionMaps;
}

/** One attention row's p_(1), p_(2) and exact sigma. */
export interface AttentionRow {
  top1: number;
  top2: number;
  sigma: number;
}

/** The analysis of some inputs before it is joined with others and summarised (analyze.ts finishAnalysis). */
export interface AnalysisPart {
  inputs: number;
  inputSpace: "image" | "embedding";
  blocks: BlockAnalysis[];
  network: BoundsAgainstTruth;
  compositionFloor: number[];
  /** Factors of the layers outside the blocks per input ({@link Analysis.outside}). */
  outside: Record<string, number[]>;
  /** Every real attention row of these inputs, in input order. */
  rows: AttentionRow[];
  /** The first input's attention maps. */
  attentionMaps: AttentionMaps;
  /** The layer rules' notes ({@link Analysis.notes}). */
  notes: string[];
  seconds: { bounds: number; truth: number };
}

/** Options of analyze (analyze.ts). */
export interface AnalyzeOptions {
  /** Which true values to compute (all by default): the network's, each block's, each head's. */
  truth?: { network?: boolean; blocks?: boolean; heads?: boolean };
  /**
   * Block and head true values (powerIterationLipschitz): cap on products per estimate
   * (default 1000) and residual tolerance (default 1e-6).
   */
  maxIterations?: number;
  tolerance?: number;
  seed?: number;
  /** MLP value composed into block bounds ("local", exact, by default). */
  mlp?: NetworkBoundsOptions["mlp"];
  /**
   * The head variants to compute (default every registered variant of dot-product attention,
   * and of L2 attention (`l2-dist`, `l2-cov`, `kim`) too for an L2-attention model; leaving out
   * `cov` skips its costly exact query path; an L2 variant on a dot-product model throws).
   */
  variants?: NetworkBoundsOptions["variants"];
  /** Padding mask [batch, n] for text models (1 = real token). */
  mask?: tf.Tensor | null;
  /** Examples per traced forward pass (default 16). */
  batchSize?: number;
  /** Called after each input with (done, total). */
  onProgress?: (done: number, total: number) => void;
  /**
   * Called as each stage of an input advances ({@link StageProgress}): after each top-level
   * layer of the bounds, the network's true value, and each block's true values; for progress lines
   * on models where one input takes minutes.
   */
  onStage?: (progress: StageProgress) => void;
  /** The position of the first input among all inputs analysed, for messages (a worker's slice) [0]. */
  inputOffset?: number;
  /** Largest number of attention rows kept in `attentionRows` (default 5000). */
  maxAttentionRows?: number;
}

/**
 * The composition floor over the inputs where it was computed: its medians and quartiles,
 * each network bound variant divided by it (how far a bound is from the best any layer-wise
 * composition of these layers could do), and it divided by the network's true value (what
 * composing layer by layer costs even with exact block values).
 */
export interface FloorSummary {
  floor: Summary;
  boundOverFloor: Record<HeadVariant, Summary>;
  floorOverTrue: Summary | null;
}
