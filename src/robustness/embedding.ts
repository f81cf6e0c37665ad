import { AttackTally, resolveAttacks } from "./tally.ts";
import { tf } from "../backend.ts";
import { networkLipschitz } from "../lipschitz/truth/inputJacobian.ts";
import type { TextClassifier } from "../nn/textClassifier.ts";
import { proxyFromMargins, writeMargins, type LipschitzProxy } from "./lipschitzProxy.ts";
import {
  crossEntropyGradient,
  labelTensor,
  predictClasses,
  reportZeroGradient,
  zeroGradientRows,
  type ClipRange,
  type GradientFn,
  type Labels,
  type LogitsFn,
  type ZeroGradientFn,
} from "./loss.ts";
import { checkCount, defaultStepSize, resolveAttackOptions, type AttackNorm } from "./options.ts";
import { pgdWithGradient, type PgdOptions } from "./pgd.ts";
import { randomOffsetL2, randomOffsetLinf } from "./random.ts";
import { pgdStepL2, pgdStepLinf } from "./steps.ts";
import type { EvaluateRobustnessOptions, RobustnessEvaluation } from "./evaluate.ts";

/**
 * Attacks on text classifiers in EMBEDDING space: the perturbed input is the matrix of token
 * embeddings E = tok[ids], float32 [b, n, d], of the real tokens; position embeddings are
 * added after the perturbation (a constant shift, so the Jacobian is the one of the sequence
 * entering block 0, the space of networkLipschitz and networkBounds for text). Padding rows
 * (mask 0) are never moved: the gradient and the random start are zeroed there. The l_2 norm
 * is per example over all n * d entries (padding contributes 0), l_inf is per entry.
 *
 * There is NO clipping: unlike pixels in [0, 1], the embedding space has no valid range (any
 * vector is a legal input to the blocks; most are not the embedding of any token), so the
 * eps-ball is the only constraint. eps is in embedding units; compare it with the typical
 * token-embedding norm (attack.json records eps as given).
 */

/** "No valid range": a clip range that never binds (the embedding space is unbounded). */
export const NO_CLIP: ClipRange = [-Number.MAX_VALUE, Number.MAX_VALUE];

/** A text batch: ids int32 [b, n], padding mask [b, n] (1 = real token, 0 = [PAD]). */
export interface TextInputs {
  ids: tf.Tensor;
  mask: tf.Tensor;
}

function checkText(model: TextClassifier, inputs: TextInputs, who: string): void {
  if (model.config.kind !== "text")
    throw new RangeError(`${who}: embedding-space attacks need a text model`);
  const { ids, mask } = inputs;
  if (ids.dtype !== "int32" || ids.rank !== 2 || ids.shape[0] === 0)
    throw new RangeError(
      `${who}: ids must be a non-empty int32 [b, n], got ${ids.dtype} [${ids.shape.join(", ")}]`,
    );
  if (mask.rank !== 2 || mask.shape[0] !== ids.shape[0] || mask.shape[1] !== ids.shape[1])
    throw new RangeError(
      `${who}: mask must be [${ids.shape.join(", ")}], got [${mask.shape.join(", ")}]`,
    );
}

/** The mask as float32 [b, n, 1] (1 = real). */
function mask3(mask: tf.Tensor): tf.Tensor {
  return tf.tidy(() => tf.expandDims(tf.cast(tf.notEqual(mask, 0), "float32"), 2));
}

/**
 * The token embeddings of a batch, E = tok[ids], float32 [b, n, d] (padding rows hold the
 * [PAD] embedding; they are masked in attention). The caller disposes it.
 */
export function tokenEmbeddingsOf(model: TextClassifier, ids: tf.Tensor): tf.Tensor {
  return model.tokenEmbeddings(ids);
}

/**
 * Logits from token embeddings (inference mode): E -> f(E + pos[0..n), mask).
 *
 * @param mask [b, n] of the batch the function will be called with.
 * @returns E float32 [b, n, d] -> logits float32 [b, classes].
 */
export function embeddingLogits(model: TextClassifier, mask: tf.Tensor): LogitsFn {
  return (e) =>
    tf.tidy(() => {
      const [, n, d] = e.shape as number[];
      const pos = tf.reshape(tf.slice(model.params.get("pos"), [0, 0], [n, d]), [1, n, d]);
      return model.forwardFromEmbeddings(tf.add(e, pos), { mask, training: false }).logits;
    });
}

/** The gradient of the summed cross-entropy w.r.t. E, zero on padding rows. */
function maskedGradient(model: TextClassifier, mask: tf.Tensor, labels: tf.Tensor): GradientFn {
  const g = crossEntropyGradient(embeddingLogits(model, mask), labels);
  return (e) => tf.tidy(() => tf.mul(g(e), mask3(mask)));
}

/**
 * FGSM in embedding space (one step of size eps on the masked cross-entropy gradient; l_inf:
 * sign, l_2: normalised per example). No clipping (see the module comment). An example whose
 * gradient is exactly zero is left unchanged and flagged (one warning, options.onZeroGradient).
 *
 * @param inputs ids int32 [b, n] and mask [b, n]; @param labels true classes [b].
 * @param options.eps radius, finite and >= 0, in embedding units (no upper bound: the
 *   embedding space has no valid range).
 * @returns adversarial token embeddings float32 [b, n, d] (caller disposes); padding rows
 *   equal tok[PAD].
 * @throws RangeError on a non-text model, malformed ids / mask / labels, or a bad eps / norm.
 */
export function fgsmEmbedding(
  model: TextClassifier,
  inputs: TextInputs,
  labels: Labels,
  options: {
    eps: number;
    norm?: AttackNorm;
    onWarning?: (m: string) => void;
    onZeroGradient?: ZeroGradientFn;
  },
): tf.Tensor {
  checkText(model, inputs, "fgsmEmbedding");
  const o = resolveAttackOptions(
    { eps: options.eps, norm: options.norm, steps: 1, clip: NO_CLIP },
    "fgsmEmbedding",
  );
  const y = labelTensor(
    labels,
    inputs.ids.shape[0] as number,
    model.config.classes,
    "fgsmEmbedding",
  );
  const e0 = tokenEmbeddingsOf(model, inputs.ids);
  const g = maskedGradient(model, inputs.mask, y)(e0);
  try {
    reportZeroGradient(zeroGradientRows(g), "fgsmEmbedding", o.norm, "at the clean input", options);
    return o.norm === "linf"
      ? pgdStepLinf(e0, e0, g, o.eps, o.eps, NO_CLIP)
      : pgdStepL2(e0, e0, g, o.eps, o.eps, NO_CLIP);
  } finally {
    tf.dispose([y, e0, g]);
  }
}

/**
 * PGD in embedding space (Madry et al. 2018; l_inf or l_2): random start in the ball (seeded,
 * zeroed on padding rows), `steps` ascent steps on the masked cross-entropy gradient, each
 * projected onto the eps-ball around E0 = tok[ids]; no clipping. Returns the last iterate.
 *
 * @param inputs ids int32 [b, n] and mask [b, n]; @param labels true classes [b].
 * @param options as {@link PgdOptions} (clip and start are ignored).
 * @returns adversarial token embeddings float32 [b, n, d] (caller disposes).
 * @throws RangeError on a non-text model, malformed inputs or labels, or bad options.
 */
export function pgdEmbedding(
  model: TextClassifier,
  inputs: TextInputs,
  labels: Labels,
  options: PgdOptions,
): tf.Tensor {
  checkText(model, inputs, "pgdEmbedding");
  const o = resolveAttackOptions({ ...options, clip: NO_CLIP }, "pgdEmbedding");
  const y = labelTensor(
    labels,
    inputs.ids.shape[0] as number,
    model.config.classes,
    "pgdEmbedding",
  );
  const e0 = tokenEmbeddingsOf(model, inputs.ids);
  let start: tf.Tensor | undefined;
  try {
    if (o.randomStart && o.eps > 0) {
      const offset = (o.norm === "linf" ? randomOffsetLinf : randomOffsetL2)(
        e0.shape,
        o.eps,
        o.seed,
      );
      start = tf.tidy(() => tf.mul(offset, mask3(inputs.mask)));
      offset.dispose();
    }
    return pgdWithGradient(maskedGradient(model, inputs.mask, y), e0, {
      ...options,
      norm: o.norm,
      stepSize: o.stepSize,
      randomStart: false,
      start,
      clip: NO_CLIP,
    });
  } finally {
    tf.dispose([y, e0]);
    start?.dispose();
  }
}

/** Real tokens per row of a mask [b, n] (JS side). */
function rowLengths(mask: tf.Tensor): Int32Array {
  const [b, n] = mask.shape as number[];
  const m = mask.dataSync();
  const out = new Int32Array(b);
  for (let i = 0; i < b; i++) {
    let last = 0;
    for (let j = 0; j < n; j++) if (m[i * n + j] !== 0) last = j + 1;
    out[i] = last;
  }
  return out;
}

function streamSeed(seed: number, epsIndex: number, batchIndex: number): number {
  return (seed ^ Math.imul(epsIndex + 1, 0x85ebca6b) ^ Math.imul(batchIndex + 1, 0x9e3779b1)) >>> 0;
}

/**
 * Clean and robust accuracy of a text classifier under FGSM and/or PGD in embedding space
 * (see the module comment), the same figures and rules as evaluateRobustness for images: an
 * example is robust at eps when it is correct clean and under attack; eps 0 gives the clean
 * accuracy. Each batch is trimmed to its longest real row (padding columns do not change the
 * logits). options.clip is ignored (no clipping).
 *
 * @param inputs ids int32 [N, n] and mask [N, n] (not disposed); @param labels true classes [N].
 * @returns as evaluateRobustness; leaves tf.memory().numTensors unchanged.
 * @throws RangeError on a non-text model, malformed inputs, labels or options.
 */
export function evaluateTextRobustness(
  model: TextClassifier,
  inputs: TextInputs,
  labels: Labels,
  options: EvaluateRobustnessOptions,
): RobustnessEvaluation {
  const who = "evaluateTextRobustness";
  checkText(model, inputs, who);
  const attacks = resolveAttacks(options, who);
  const common = options.eps.map((eps) =>
    resolveAttackOptions(
      { ...options, eps, stepSize: options.stepSize ?? undefined, clip: NO_CLIP },
      who,
    ),
  );
  const batchSize = checkCount(options.batchSize ?? 32, "batchSize", who);
  const n = inputs.ids.shape[0] as number;
  const y = labelTensor(labels, n, model.config.classes, who);
  const truth = Int32Array.from(y.dataSync());
  y.dispose();
  const lengths = rowLengths(inputs.mask);
  const batches = Math.ceil(n / batchSize);
  const tally = new AttackTally(
    n,
    options.eps,
    attacks,
    batches,
    options.onProgress,
    options.onWarning,
  );
  for (let j = 0; j < batches; j++) {
    const start = j * batchSize;
    const size = Math.min(batchSize, n - start);
    const len = Math.max(1, ...lengths.subarray(start, start + size));
    const batch: TextInputs = {
      ids: tf.slice(inputs.ids, [start, 0], [size, len]),
      mask: tf.slice(inputs.mask, [start, 0], [size, len]),
    };
    try {
      const batchLabels = truth.subarray(start, start + size);
      const logits = embeddingLogits(model, batch.mask);
      tally.recordBatch(
        start,
        batchLabels,
        predictClasses((ids) => model.forward(ids, { mask: batch.mask }).logits, batch.ids),
        (adversarial) => predictClasses(logits, adversarial),
        (attack, e, eps, onZeroGradient) =>
          attack === "fgsm"
            ? fgsmEmbedding(model, batch, batchLabels, {
                eps,
                norm: common[e].norm,
                onWarning: tally.warnOnce,
                onZeroGradient,
              })
            : pgdEmbedding(model, batch, batchLabels, {
                ...common[e],
                seed: streamSeed(common[e].seed, e, j),
                onWarning: tally.warnOnce,
                onZeroGradient,
              }),
      );
    } finally {
      tf.dispose([batch.ids, batch.mask]);
    }
  }
  return tally.result((eps, e) => options.stepSize ?? defaultStepSize(eps, common[e].steps));
}

/**
 * The Lipschitz proxy radius of each text example in embedding space: r = margin / (sqrt(2) L)
 * with L = networkLipschitz(model, ids, {mask}) (the exact spectral norm of the logits'
 * Jacobian w.r.t. the sequence entering block 0, padding columns zero), as lipschitzProxy
 * for images. A proxy, not a certificate. Misclassified examples get radius 0.
 *
 * @param inputs ids int32 [N, n] and mask [N, n]; @param labels true classes [N].
 * @returns radii (l_2, embedding units), margins, L and the misclassified count; leaves
 *   numTensors unchanged.
 * @throws RangeError on a non-text model or malformed inputs / labels.
 */
export function textLipschitzProxy(
  model: TextClassifier,
  inputs: TextInputs,
  labels: Labels,
  options: { batchSize?: number; examplesPerPass?: number } = {},
): LipschitzProxy {
  checkText(model, inputs, "textLipschitzProxy");
  const n = inputs.ids.shape[0] as number;
  const y = labelTensor(labels, n, model.config.classes, "textLipschitzProxy");
  const truth = y.dataSync();
  y.dispose();
  const c = model.config.classes;
  const batchSize = options.batchSize ?? 64;
  const lengths = rowLengths(inputs.mask);
  const margins = new Float64Array(n);
  const lipschitz = new Float64Array(n);
  for (let start = 0; start < n; start += batchSize) {
    const size = Math.min(batchSize, n - start);
    const len = Math.max(1, ...lengths.subarray(start, start + size));
    const ids = tf.slice(inputs.ids, [start, 0], [size, len]);
    const mask = tf.slice(inputs.mask, [start, 0], [size, len]);
    try {
      const z = tf.tidy(() => model.forward(ids, { mask }).logits);
      const data = z.dataSync();
      z.dispose();
      writeMargins(data, c, truth, start, size, margins);
      lipschitz.set(
        networkLipschitz(model, ids, { mask, examplesPerPass: options.examplesPerPass }),
        start,
      );
    } finally {
      tf.dispose([ids, mask]);
    }
  }
  return proxyFromMargins(margins, lipschitz);
}
