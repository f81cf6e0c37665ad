/**
 * The time an analysis will take, estimated before it starts: for a BERT-base-sized model one
 * input takes minutes, and a user should know how many before waiting for them.
 *
 * How it is made (an estimate, not a measurement): each stage's cost is written in units this
 * machine is timed on just before the run, with coefficients fitted once to `npm run bench --
 * scale` (bench/results/scale.json: BERT-base, ViT-B/16 and GPT-2 small, 2026-12-06, 2 cores):
 *
 * - stages that run tensor operations (the network's, the blocks' and the heads' true values)
 *   in forward passes: the time of one traced forward pass of the first input, measured here;
 * - stages that run float64 JavaScript (the bounds, the exact MLP) in a JavaScript speed: the
 *   time of a fixed float64 multiply-add kernel ({@link javascriptSpeed}), against the time the
 *   same kernel took on the bench's machine.
 *
 * On the bench's three models the estimates are within about 30% of the measured stage times
 * (the bench prints both). Small models (d_model 64) take seconds, where fixed costs the
 * coefficients leave out dominate: the estimate is meant for runs of a minute and more.
 */

/** The shape of the work: what {@link estimateAnalysis} needs to know of the model and the run. */
export interface EstimatePlan {
  blocks: number;
  heads: number;
  dModel: number;
  mlpHidden: number;
  /** Tokens per input (a ViT: patches + 1). */
  tokens: number;
  classes: number;
  /** Pre-LN blocks take LayerNorm into the fused/cov rules row by row (docs/math.md section 3). */
  preNorm: boolean;
  inputs: number;
  /** The bound variants asked for (names as `--variants` takes them). */
  variants: readonly string[];
  mlp: "local" | "relaxed";
  blockTruth: boolean;
  headTruth: boolean;
  /** The cap on Lanczos products per block and head true value (`--iterations`). */
  iterations: number;
  /** Whether the checkpoint's weight-only norms are already in the weight cache. */
  weightNormsCached: boolean;
  workers: number;
}

/** This machine's speed, measured just before the run. */
export interface MachineSpeed {
  /** Seconds of one traced forward pass of one input of this model. */
  forwardSeconds: number;
  /** Seconds of {@link javascriptSpeed}'s kernel. */
  kernelSeconds: number;
}

/** One stage's estimated seconds for all inputs. */
export interface StageEstimate {
  stage: string;
  seconds: number;
}

/** The estimate: per stage (all inputs) and in all. */
export interface AnalysisEstimate {
  stages: StageEstimate[];
  perInput: number;
  total: number;
}

/**
 * Coefficients fitted to bench/results/scale.json (each comment gives the measured figures).
 * JavaScript stages are in seconds at the bench machine's kernel time {@link REFERENCE_KERNEL_SECONDS}.
 */
const FIT = {
  /** Bounds without cov/fused, per block at d_model 768, weight norms cached: 4.9 / 4.7 / 5.3 s for 12 blocks. */
  boundsPerBlock: 0.42,
  /** Weight-only norms computed (cold cache), per block at d_model 768: 42 / 34 / 36 s for 12 blocks. */
  weightNormsPerBlock: 3.1,
  /**
   * cov and fused together, per head at 128 tokens and d_k 64: post-LN 43 s (BERT-base), pre-LN
   * 133 s (GPT-2 small) and 230 s at 197 tokens (ViT-B/16), for 144 heads.
   */
  exactQueryPerHead: { post: 0.3, pre: 0.92 },
  /** Growth with the tokens: pre-LN 133 -> 230 s from 128 to 197 tokens (exponent 1.27); post-LN assumed 1.5. */
  exactQueryExponent: { post: 1.5, pre: 1.27 },
  /** The exact MLP in float64 JavaScript: 1.1e13 floating-point operations (exactMlpCost's count) in 3,330 s (BERT-base). */
  exactMlpFlopsPerSecond: 3.3e9,
  /** Network true value per class, in forward passes: 7.6 / 62 / 8.6 s against 1.0 / 1.6 / 1.2 s, 2 / 10 / 2 classes. */
  networkPerClass: 3.8,
  /** Block true values per Lanczos product, in forward passes: 105 / 201 / 111 s for 40 products. */
  blockTruthPerProduct: 2.6,
  /** Head true values per Lanczos product, in forward passes: 234 / 364 / 217 s for 40 products. */
  headTruthPerProduct: 5.4,
  /** Lanczos products a true value takes when it converges (the bench's cap; --iterations caps it). */
  typicalProducts: 40,
  /** Share of the ideal speed-up that split work keeps per extra worker (block slices; measured 1.5-1.7x on 2). */
  workerEfficiency: 0.8,
} as const;

/** The kernel time of {@link javascriptSpeed} on the bench's machine (2 cores, 2026-12-06). */
export const REFERENCE_KERNEL_SECONDS = 0.04;

/**
 * The estimated seconds of each stage of an analysis, from the model's shape, the run's options
 * and this machine's measured speed (see the file's comment for how; an estimate, within about
 * 30% on the bench's models, and for runs of a minute and more).
 *
 * @param plan the model's shape and the run's options.
 * @param speed the machine's speed, measured just before the run.
 * @returns seconds per stage for every input, per input, and in all (with the workers' split).
 * @throws RangeError when a count is not a positive integer or a time not positive and finite.
 * @example
 * estimateAnalysis(
 *   { blocks: 12, heads: 12, dModel: 768, mlpHidden: 3072, tokens: 128, classes: 2, preNorm: false, inputs: 1,
 *     variants: ["t3-half", "t3-exact"], mlp: "relaxed", blockTruth: true, headTruth: false, iterations: 1000,
 *     weightNormsCached: true, workers: 1 },
 *   { forwardSeconds: 1.0, kernelSeconds: REFERENCE_KERNEL_SECONDS },
 * ).total; // about 5 + 8 + 104 s
 */
export function estimateAnalysis(plan: EstimatePlan, speed: MachineSpeed): AnalysisEstimate {
  for (const key of ["blocks", "heads", "dModel", "mlpHidden", "tokens", "classes", "inputs", "iterations", "workers"] as const)
    if (!Number.isInteger(plan[key]) || plan[key] < 1)
      throw new RangeError(`estimateAnalysis: plan.${key} must be a positive integer, got ${plan[key]}`);
  for (const key of ["forwardSeconds", "kernelSeconds"] as const)
    if (!(speed[key] > 0 && Number.isFinite(speed[key])))
      throw new RangeError(`estimateAnalysis: speed.${key} must be a positive finite number of seconds, got ${speed[key]}`);
  const js = speed.kernelSeconds / REFERENCE_KERNEL_SECONDS;
  const widthCube = (plan.dModel / 768) ** 3;
  const dk = plan.dModel / plan.heads;
  const norm = plan.preNorm ? "pre" : "post";
  const products = Math.min(plan.iterations, FIT.typicalProducts);
  const perInput: StageEstimate[] = [];
  const add = (stage: string, seconds: number) => perInput.push({ stage, seconds });

  add("bounds", FIT.boundsPerBlock * plan.blocks * (plan.dModel / 768) ** 2 * js);
  if (plan.variants.some((v) => v === "cov" || v === "fused" || v === "l2-cov"))
    add(
      "bounds: cov and fused",
      FIT.exactQueryPerHead[norm] * plan.blocks * plan.heads * (plan.tokens / 128) ** FIT.exactQueryExponent[norm] * (dk / 64) ** 2 * js,
    );
  if (plan.mlp === "local")
    add("bounds: exact MLP", (2 * 2 * plan.dModel * plan.dModel * plan.mlpHidden * plan.tokens * plan.blocks / FIT.exactMlpFlopsPerSecond) * js);
  add("network true value", FIT.networkPerClass * plan.classes * speed.forwardSeconds);
  if (plan.blockTruth) add("block true values", FIT.blockTruthPerProduct * products * speed.forwardSeconds);
  if (plan.headTruth) add("head true values", FIT.headTruthPerProduct * products * speed.forwardSeconds);

  // Once per checkpoint, not per input.
  const once: StageEstimate[] = plan.weightNormsCached
    ? []
    : [{ stage: "weight norms (once per checkpoint)", seconds: FIT.weightNormsPerBlock * plan.blocks * widthCube * js }];
  // Workers split the blocks of one input (or the inputs): the network's true value stays in one.
  const split = 1 + FIT.workerEfficiency * (Math.min(plan.workers, plan.blocks) - 1);
  const stages = [
    ...once,
    ...perInput.map((s) => ({
      stage: s.stage,
      seconds: (s.seconds * plan.inputs) / (s.stage === "network true value" ? 1 : split),
    })),
  ];
  const total = stages.reduce((a, s) => a + s.seconds, 0);
  return { stages, perInput: (total - (once[0]?.seconds ?? 0)) / plan.inputs, total };
}

/**
 * Times a fixed float64 kernel (2 x 10^7 multiply-adds in 64 x 64 tiles, the pattern of the
 * bounds' row contractions): the JavaScript speed {@link estimateAnalysis} scales its bound
 * stages by. The best of four runs (the first also compiles), so a moment's load does not count; about 0.15 s.
 *
 * @returns seconds of one run of the kernel.
 * @example const kernelSeconds = javascriptSpeed(); // about 0.04 on the bench's machine
 */
export function javascriptSpeed(): number {
  const a = new Float64Array(64 * 64);
  const b = new Float64Array(64 * 64);
  for (let i = 0; i < a.length; i++) {
    a[i] = ((i * 7919) % 113) / 113;
    b[i] = ((i * 104729) % 127) / 127;
  }
  const c = new Float64Array(64 * 64);
  let best = Infinity;
  for (let run = 0; run < 4; run++) {
    const t0 = performance.now();
    for (let rep = 0; rep < 76; rep++) {
      for (let i = 0; i < 64; i++)
        for (let k = 0; k < 64; k++) {
          const aik = a[i * 64 + k];
          for (let j = 0; j < 64; j++) c[i * 64 + j] += aik * b[k * 64 + j];
        }
    }
    best = Math.min(best, (performance.now() - t0) / 1000);
  }
  if (!Number.isFinite(c[0])) throw new Error("javascriptSpeed: kernel overflowed"); // keeps the loop from being removed
  return best;
}

/**
 * The line a user sees before a long analysis: the total and its stages.
 *
 * @example estimateLine(estimate, 1) // "estimated time before starting: about 2.0 min for 1 input (bounds 5 s, ...)"
 */
export function estimateLine(estimate: AnalysisEstimate, inputs: number, duration: (s: number) => string): string {
  const parts = estimate.stages.map((s) => `${s.stage} ${duration(s.seconds)}`);
  return `estimated time: about ${duration(estimate.total)} for ${inputs} input${inputs === 1 ? "" : "s"} (${parts.join(", ")}; from this machine's speed now and the scale bench's fit)`;
}
