import { oneHotFloat, tf } from "../backend.ts";
import { attentionProbabilities, type LayerTrace } from "../nn/trace.ts";
import { sigmaQuadTensor, sigmaTensor, sigmaTop2Tensor } from "../softmax/tensor.ts";

/**
 * The JaSMin regularizer (docs/math.md section 4): a penalty on s_i = sigma(P_i), the spectral norm
 * of the softmax Jacobian of each attention row, over the heads of chosen layers. The
 * regularised loss is cross_entropy + lambda * R.
 */

/** Which per-row value s_i: the closed form sigma_top2 (default), sigma_quad, or the exact sigma. */
export type JasminNorm = "top2" | "quad" | "exact";
/** How the s_i are reduced to R (see {@link jasminFromProbabilities}). */
export type JasminReduce = "max-log" | "max" | "mean";

/**
 * The largest sensible weight lambda. R is of order 1 (max-log: log sigma in [log 1e-6, log 1/2];
 * max, mean: sigma in [0, 1/2]) and so is the cross-entropy (log 10 at chance on 10 classes);
 * past 1e6, lambda * R is so large that float32 (24-bit mantissa: a spacing of 0.0625 at 1e6)
 * rounds the cross-entropy's changes away and the model is trained on the penalty alone.
 */
export const JASMIN_MAX_LAMBDA = 1e6;

export const JASMIN_NORMS: readonly JasminNorm[] = ["top2", "quad", "exact"];
export const JASMIN_REDUCTIONS: readonly JasminReduce[] = ["max-log", "max", "mean"];

/** Settings of the regularizer. */
export interface JasminOptions {
  /** Per-row value (default "top2"). */
  norm?: JasminNorm;
  /** Reduction (default "max-log"). */
  reduce?: JasminReduce;
  /** Block indices to regularise; null/undefined = every block. */
  layers?: readonly number[] | null;
  /** Floor inside the log of "max-log" (default 1e-6); rows below it get zero gradient. */
  eps?: number;
  /**
   * The counts of the whole batch when `probs` hold only a slice of it (data-parallel
   * training): the means divide by these instead of the slice's own counts, so the values of
   * the slices of a batch add up to R of the whole batch, and so do their gradients.
   */
  totals?: BatchTotals;
}

/**
 * Counts of a whole batch that JaSMin's means divide by (see {@link batchTotals}).
 */
export interface BatchTotals {
  /** Examples in the batch. */
  examples: number;
  /** Examples with at least one real row (all of them without a mask). */
  realExamples: number;
  /** Real query rows (mask entries equal to 1); without a mask, examples * n is used instead. */
  realRows: number;
}

/**
 * The {@link BatchTotals} of a batch of `examples` examples of n tokens, from its padding mask
 * (values [examples * n], 1 = real token) or none.
 *
 * @throws RangeError when the mask does not hold examples * n values.
 * @example batchTotals(2, 3, new Float32Array([1, 1, 0, 0, 0, 0])) // { examples: 2, realExamples: 1, realRows: 2 }
 */
export function batchTotals(
  examples: number,
  n: number,
  mask: ArrayLike<number> | null,
): BatchTotals {
  if (mask === null) return { examples, realExamples: examples, realRows: examples * n };
  if (mask.length !== examples * n)
    throw new RangeError(
      `batchTotals: mask: expected ${examples * n} values ([${examples}, ${n}]), got ${mask.length}`,
    );
  let realExamples = 0;
  let realRows = 0;
  for (let e = 0; e < examples; e++) {
    let rows = 0;
    for (let i = 0; i < n; i++) if (mask[e * n + i] > 0) rows++;
    realRows += rows;
    if (rows > 0) realExamples++;
  }
  return { examples, realExamples, realRows };
}

type Custom = (...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
  value: tf.Tensor;
  gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => tf.Tensor[];
};

/**
 * sigma_top2 = a (r + b) per row (a, b the two largest entries, r the sum of all but the
 * largest) with a gradient of its own that saves only p: its value is sigmaTop2Tensor's (the
 * same operations) and so is its gradient, dp = dy (r + b) on the largest entry, dy a on the
 * others and 2 dy a on the second largest, which is what autodiff of sigmaTop2Tensor computes
 * (each entry is one product plus zeros, so no order of additions can change it). Autodiff kept
 * about 20 tensors of p's size [b, H, n, n] on the gradient tape per attention layer until the
 * backward pass ended (16 MB per example and layer at BERT-base size, 128 tokens); here the
 * backward pass recomputes the two largest entries from p in a tidy of its own.
 */
const sigmaTop2Saving = tf.customGrad(((p: tf.Tensor, save: tf.GradSaveFunc) => {
  save([p]);
  return {
    value: sigmaTop2Tensor(p),
    gradFunc: (dy: tf.Tensor, [ps]: tf.Tensor[]) =>
      tf.tidy(() => {
        const n = ps.shape[ps.rank - 1];
        const first = oneHotFloat(tf.argMax(ps, -1), n);
        const notFirst = tf.sub(1, first);
        const rest = tf.mul(ps, notFirst);
        const second = oneHotFloat(tf.argMax(rest, -1), n);
        const a = tf.sum(tf.mul(ps, first), -1);
        const r = tf.sum(rest, -1);
        const b = tf.sum(tf.mul(rest, second), -1);
        const dA = tf.expandDims(tf.mul(dy, tf.add(r, b)), -1); // d sigma / d a, times dy
        const dR = tf.expandDims(tf.mul(dy, a), -1); // d sigma / d r = d sigma / d b, times dy
        return [tf.add(tf.mul(dA, first), tf.mul(tf.add(dR, tf.mul(dR, second)), notFirst))];
      }),
  };
}) as unknown as Custom as Parameters<typeof tf.customGrad>[0]);

/**
 * s_i per attention row.
 *
 * @param p attention probabilities float32 [..., n].
 * @returns float32 [...]: sigma_top2, sigma_quad or the exact sigma of each row.
 * @throws RangeError/TypeError from the sigma functions on a scalar or non-float32 input.
 */
export function rowSigma(p: tf.Tensor, norm: JasminNorm = "top2"): tf.Tensor {
  switch (norm) {
    case "top2":
      return sigmaTop2Saving(p);
    case "quad":
      return sigmaQuadTensor(p);
    case "exact":
      return sigmaTensor(p);
    default:
      throw new RangeError(`jasmin: unknown norm "${String(norm)}" (expected top2, quad or exact)`);
  }
}

/**
 * The per-(example, head) max over query rows of s, taken as the entry selected by argMax +
 * one-hot (its gradient flows to that row only; docs/performance.md: cheaper on wasm than tf.max's).
 * Masked rows are replaced by -1 (below every sigma >= 0) with zero gradient. Both
 * selections are `where`s, not products with a 0/1 tensor, so a non-finite value on a row
 * that is not selected cannot turn the result into NaN (0 * inf).
 *
 * @param s float32 [b, H, n]; rowMask float32 [b, 1, n] (1 = real row) or null.
 * @returns float32 [b, H].
 */
function maxOverRows(s: tf.Tensor, rowMask: tf.Tensor | null): tf.Tensor {
  const n = s.shape[s.rank - 1];
  const candidates = rowMask === null ? s : tf.where(realRows(s, rowMask), s, tf.fill(s.shape, -1));
  // argMax and oneHot pass no gradient; the selection by the one-hot carries it to the chosen
  // row only (oneHot in int32: the wasm backend's float32 OneHot is all zeros, see backend.ts;
  // a cast, not tf.equal, makes it boolean: Equal has no gradient rule and sits on the tape).
  const pick = tf.cast(tf.oneHot(tf.argMax(candidates, -1), n), "bool");
  return tf.sum(tf.where(pick, s, tf.zerosLike(s)), -1);
}

/**
 * Boolean [b, H, n] (s's shape): true on the real rows of rowMask [b, 1, n], tiled over the
 * heads. Not derived from s, so it stays off the gradient tape (Greater has no gradient rule).
 */
function realRows(s: tf.Tensor, rowMask: tf.Tensor): tf.Tensor {
  return tf.greater(tf.tile(rowMask, [1, s.shape[1] as number, 1]), 0);
}

/**
 * JaSMin R from the attention probabilities of the chosen layers.
 *
 * With s_{l,b,h,i} the per-row value (`norm`) of layer l, example b, head h, query row i, and
 * real rows those with mask 1 (all rows without a mask):
 * - `max-log` (default): mean over l of [ mean over (b, h) of log(max(max_i s, eps)) ]; the
 *   paper's JaSMin (log sigma_top2, max over query rows, mean over heads and batch, averaged
 *   over layers);
 * - `max`: mean over l of [ mean over (b, h) of max_i s ];
 * - `mean`: mean of s over l, b, h and real rows i.
 * Masked query rows never contribute, and get zero gradient; examples without any real row
 * are left out of the means over b.
 *
 * @param probs one tensor per layer, float32 [b, H, n, n] (rows sum to 1).
 * @param mask float32 [b, n] with 1 = real token, or null.
 * @returns a float32 scalar (differentiable with respect to `probs`).
 * @throws RangeError when `probs` is empty, a tensor is not rank 4, or the mask shape does not
 *   match; on an unknown norm or reduction.
 */
export function jasminFromProbabilities(
  probs: readonly tf.Tensor[],
  mask: tf.Tensor | null,
  options: JasminOptions = {},
): tf.Tensor {
  const norm = options.norm ?? "top2";
  const { b, n } = checkInputs(probs, mask, options);
  return tf.tidy(() =>
    reduceRowSigma(
      probs.map((p) => rowSigma(p, norm)),
      b,
      n,
      mask,
      options,
    ),
  );
}

/**
 * Checks the reduction, the probabilities' shapes and the mask's of {@link jasminFromProbabilities}.
 *
 * @returns the batch size b and tokens n.
 * @throws RangeError as jasminFromProbabilities.
 */
function checkInputs(
  probs: readonly tf.Tensor[],
  mask: tf.Tensor | null,
  options: JasminOptions,
): { b: number; n: number } {
  const reduce = options.reduce ?? "max-log";
  if (!JASMIN_REDUCTIONS.includes(reduce))
    throw new RangeError(
      `jasmin: unknown reduction "${String(reduce)}" (expected max-log, max or mean)`,
    );
  if (probs.length === 0) throw new RangeError("jasmin: no attention layers selected");
  for (const p of probs)
    if (p.rank !== 4 || p.shape[2] !== p.shape[3])
      throw new RangeError(
        `jasmin: attention probabilities must be [b, H, n, n], got [${p.shape.join(", ")}]`,
      );
  const [b, , n] = probs[0].shape;
  if (mask !== null && (mask.rank !== 2 || mask.shape[0] !== b || mask.shape[1] !== n))
    throw new RangeError(`jasmin: mask must be [${b}, ${n}], got [${mask.shape.join(", ")}]`);
  return { b, n };
}

/**
 * R of {@link jasminFromProbabilities} from the per-row values s = rowSigma(p) of each layer,
 * float32 [b, H, n] (the same operations on them, so the same value).
 */
function reduceRowSigma(
  sigmas: readonly tf.Tensor[],
  b: number,
  n: number,
  mask: tf.Tensor | null,
  options: JasminOptions,
): tf.Tensor {
  const reduce = options.reduce ?? "max-log";
  const eps = options.eps ?? 1e-6;
  const totals = options.totals;
  return tf.tidy(() => {
    const rowMask = mask === null ? null : tf.reshape(tf.cast(mask, "float32"), [b, 1, n]);
    // 1 for examples with at least one real row (the normal case).
    const exampleWeight =
      mask === null
        ? null
        : tf.cast(tf.greater(tf.sum(tf.reshape(rowMask as tf.Tensor, [b, n]), 1), 0), "float32");
    const perLayer = sigmas.map((s) => {
      const heads = s.shape[1] as number;
      if (reduce === "mean") {
        if (totals !== undefined) {
          const total =
            rowMask === null
              ? tf.sum(s)
              : tf.sum(tf.where(realRows(s, rowMask), s, tf.zerosLike(s)));
          return tf.div(total, (rowMask === null ? totals.examples * n : totals.realRows) * heads);
        }
        if (rowMask === null) return tf.mean(s);
        const total = tf.sum(tf.where(realRows(s, rowMask), s, tf.zerosLike(s)));
        return tf.div(total, tf.mul(tf.sum(rowMask), heads));
      }
      let m = maxOverRows(s, rowMask); // [b, H]
      if (reduce === "max-log") m = tf.log(tf.maximum(m, eps));
      if (totals !== undefined) {
        const sum =
          exampleWeight === null ? tf.sum(m) : tf.sum(tf.mul(tf.sum(m, 1), exampleWeight));
        return tf.div(
          sum,
          Math.max(exampleWeight === null ? totals.examples : totals.realExamples, 1) * heads,
        );
      }
      if (exampleWeight === null) return tf.mean(m);
      const perExample = tf.sum(m, 1); // [b]
      return tf.div(
        tf.sum(tf.mul(perExample, exampleWeight)),
        tf.mul(tf.maximum(tf.sum(exampleWeight), 1), heads),
      );
    });
    return tf.div(tf.addN(perLayer), sigmas.length);
  });
}

/**
 * Block indices a layer selection picks.
 *
 * @throws RangeError naming the bad index when one is not an integer in [0, blocks).
 */
export function selectLayers(
  blocks: number,
  layers: readonly number[] | null | undefined,
): number[] {
  if (layers === null || layers === undefined) return Array.from({ length: blocks }, (_, i) => i);
  if (layers.length === 0) throw new RangeError("jasmin: the layer list is empty");
  for (const i of layers)
    if (!Number.isInteger(i) || i < 0 || i >= blocks)
      throw new RangeError(
        `jasmin: layer ${i} does not exist (the model has blocks 0..${blocks - 1})`,
      );
  return [...new Set(layers)].sort((x, y) => x - y);
}

/**
 * JaSMin R of a traced forward pass (see {@link jasminFromProbabilities}), over the attention
 * layers in `options.layers` (default all; index i is the i-th attention layer of the trace,
 * nn/trace.ts attentionProbabilities, which is block i in the classifiers), with the trace's
 * padding mask.
 *
 * @param trace from model.forward(x, {trace: true}) (the caller still owns and disposes it).
 * @returns a float32 scalar, differentiable with respect to the model's parameters when the
 *   forward pass ran under a gradient tape.
 * @throws RangeError as jasminFromProbabilities and selectLayers.
 */
export function jasminPenalty(trace: LayerTrace, options: JasminOptions = {}): tf.Tensor {
  const probabilities = attentionProbabilities(trace);
  const layers = selectLayers(probabilities.length, options.layers);
  return jasminFromProbabilities(
    layers.map((i) => probabilities[i]),
    trace.mask,
    options,
  );
}

/**
 * Mean of s_i (per `norm`) over every layer, head, example and real query row of a trace: the
 * `meanSigma` training metric (with `totals`, a slice's share of the whole batch's mean).
 *
 * @returns a float32 scalar (a metric: leave it out of the loss).
 */
export function meanTraceSigma(
  trace: LayerTrace,
  norm: JasminNorm = "top2",
  totals?: BatchTotals,
): tf.Tensor {
  return jasminFromProbabilities(attentionProbabilities(trace), trace.mask, {
    norm,
    reduce: "mean",
    ...(totals === undefined ? {} : { totals }),
  });
}

/**
 * JaSMin R ({@link jasminPenalty}) and the mean sigma ({@link meanTraceSigma}) of a traced
 * forward pass, with s_i computed once per attention layer and shared by both (the same values
 * as the two functions; computing s twice kept twice its intermediate tensors on the gradient
 * tape: at BERT-base size, 9 MB per example and layer).
 *
 * @param trace from model.forward(x, {trace: true}) (the caller still owns and disposes it).
 * @param options as {@link jasminPenalty}; totals apply to both figures.
 * @returns float32 scalars `penalty` (differentiable as jasminPenalty's) and `meanSigma`.
 * @throws RangeError as jasminPenalty.
 * @example const { penalty, meanSigma } = jasminWithMeanSigma(trace, { norm: "top2" });
 */
export function jasminWithMeanSigma(
  trace: LayerTrace,
  options: JasminOptions = {},
): { penalty: tf.Tensor; meanSigma: tf.Tensor } {
  const probabilities = attentionProbabilities(trace);
  const layers = selectLayers(probabilities.length, options.layers);
  const norm = options.norm ?? "top2";
  const mask = trace.mask;
  const { b, n } = checkInputs(probabilities, mask, options);
  return tf.tidy(() => {
    const sigmas = probabilities.map((p) => rowSigma(p, norm));
    const totals = options.totals === undefined ? {} : { totals: options.totals };
    return {
      penalty: reduceRowSigma(
        layers.map((i) => sigmas[i]),
        b,
        n,
        mask,
        options,
      ),
      meanSigma: reduceRowSigma(sigmas, b, n, mask, { norm, reduce: "mean", ...totals }),
    };
  });
}
