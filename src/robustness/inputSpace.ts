import { tf } from "../backend.ts";
import { networkLipschitz } from "../lipschitz/truth/inputJacobian.ts";
import type { TransformerClassifier } from "../nn/model.ts";
import type { TextClassifier } from "../nn/textClassifier.ts";
import {
  checkInputs,
  crossEntropyGradient,
  inferenceLogits,
  predictClasses,
  type ClipRange,
  type GradientFn,
  type LogitsFn,
} from "./loss.ts";

/**
 * The space an attack moves in, said once so that FGSM, PGD, evaluation and the Lipschitz
 * proxy are written once:
 *
 * - images: the pixels themselves, every entry in the clip range ([0, 1]); everything may move;
 * - token embeddings of a text model: E = tok[ids], float32 [b, n, d], of the real tokens;
 *   position embeddings are added after the perturbation (a constant shift, so the Jacobian
 *   is the one of the sequence entering block 0, the space of networkLipschitz and
 *   networkBounds for text). Padding rows (mask 0) never move (gradients and random starts
 *   are masked there), and there is NO clipping: unlike pixels, the embedding space has no
 *   valid range (any vector is a legal input to the blocks), so the eps-ball is the only
 *   constraint ({@link NO_CLIP}).
 */

/** "No valid range": a clip range that never binds (the embedding space is unbounded). */
export const NO_CLIP: ClipRange = [-Number.MAX_VALUE, Number.MAX_VALUE];

/** A text batch: ids int32 [b, n], padding mask [b, n] (1 = real token, 0 = [PAD]). */
export interface TextInputs {
  ids: tf.Tensor;
  mask: tf.Tensor;
}

/** One batch of an {@link InputSpace}: what an attack perturbs, and how it is classified. */
export interface InputBatch {
  /** Examples in the batch. */
  readonly size: number;
  /** The clean point the attacks perturb, float32 [b, ...] (images, or token embeddings [b, n, d]); owned by the batch. */
  readonly x: tf.Tensor;
  /** Valid range of every entry of x (images [0, 1]; embeddings {@link NO_CLIP}). */
  readonly clip: ClipRange;
  /** Perturbed points (x's shape) -> logits float32 [b, classes], model in inference mode. */
  readonly logits: LogitsFn;
  /** Logits [b, classes] of the clean batch as the model reads it (images, or ids with the mask); a new tensor. */
  cleanLogits(): tf.Tensor;
  /** Predicted classes of the clean batch (argmax of cleanLogits; throws InputError on non-finite logits). */
  predictClean(): Int32Array;
  /**
   * A perturbation (or gradient) with the entries that must not move set to 0 (padding rows
   * of text), as a new tensor; null when every entry may move (images).
   */
  readonly mask: ((delta: tf.Tensor) => tf.Tensor) | null;
  /**
   * The examples at `rows` (indices into this batch, in the order given) as a batch of their
   * own, for attacks that go on with the inputs not yet broken (AutoAttack, APGD-T, Square);
   * the caller disposes it (this batch stays usable).
   */
  select(rows: readonly number[]): InputBatch;
  /** Frees what the batch owns (not the tensors it was built from). */
  dispose(): void;
}

/** A set of N examples to attack, in batches. */
export interface InputSpace {
  /** "image" (pixel space, clipped) or "embedding" (token embeddings, padding masked, no clipping). */
  readonly kind: "image" | "embedding";
  /** Examples N. */
  readonly count: number;
  /** Classes of the model. */
  readonly classes: number;
  /** Valid range of every entry ({@link NO_CLIP} when unbounded). */
  readonly clip: ClipRange;
  /** Shape [N, ...] of the perturbed inputs, for the l_2 radius bound; undefined when unbounded. */
  readonly shape?: readonly number[];
  /** Checks the inputs (finite, inside the clip range), naming `who`; throws RangeError/TypeError. */
  check(who: string): void;
  /** Examples start .. start + size - 1 as a batch (the caller disposes it). */
  batch(start: number, size: number): InputBatch;
  /**
   * L per example [N]: the exact spectral norm of the logits' Jacobian with respect to the
   * perturbed input (networkLipschitz), in passes of `batchSize` examples where the space
   * batches (text) and `examplesPerPass` examples per backward pass.
   */
  localLipschitz(options: { batchSize: number; examplesPerPass?: number }): Float64Array;
}

/**
 * The name an attack gives itself in messages: its registered name for images, with
 * "Embedding" appended in embedding space (fgsm -> fgsmEmbedding).
 *
 * @example attackWho("pgd", "embedding") // "pgdEmbedding"
 */
export function attackWho(name: string, kind: InputSpace["kind"]): string {
  return kind === "embedding" ? `${name}Embedding` : name;
}

/**
 * The gradient of the summed cross-entropy on the true labels with respect to the batch's
 * perturbed input, zero where the batch may not move (padding rows).
 *
 * @param labels int32 [b] (kept: the function uses it on each call).
 * @returns x -> a new float32 tensor of x's shape.
 * @example lossGradient(embeddingBatch(model, { ids, mask }), labels)(e) // 0 on padding rows
 */
export function lossGradient(batch: InputBatch, labels: tf.Tensor): GradientFn {
  const g = crossEntropyGradient(batch.logits, labels);
  const mask = batch.mask;
  if (mask === null) return g;
  return (x) => tf.tidy(() => mask(g(x)));
}

/**
 * A single batch of images [b, ...] as an {@link InputBatch}; x is not copied and not disposed
 * by the batch.
 *
 * @example const b = imageBatch(model, images, [0, 1]); b.predictClean() // Int32Array [b]
 */
export function imageBatch(
  model: TransformerClassifier,
  x: tf.Tensor,
  clip: ClipRange,
  owned = false,
): InputBatch {
  const logits = inferenceLogits(model);
  return {
    size: x.shape[0] as number,
    x,
    clip,
    logits,
    cleanLogits: () => logits(x),
    predictClean: () => predictClasses(logits, x),
    mask: null,
    select: (rows) => imageBatch(model, gatherRows(x, rows), clip, true),
    dispose: () => {
      if (owned) x.dispose();
    },
  };
}

/**
 * Images in input space: float32 [N, H, W, C] or [N, H*W*C], every entry in `clip` ([0, 1]);
 * attacks are clipped to it. The images are not copied or disposed.
 *
 * @example const space = imageSpace(model, images); evaluateIn(space, labels, { eps: [0, 0.1] }, "me")
 */
export function imageSpace(
  model: TransformerClassifier,
  images: tf.Tensor,
  clip: ClipRange = [0, 1],
): InputSpace {
  return {
    kind: "image",
    count: images.shape[0] as number,
    classes: model.config.classes,
    clip,
    shape: images.shape,
    check: (who) => checkInputs(images, clip, who),
    batch: (start, size) => imageBatch(model, tf.slice(images, [start], [size]), clip, true),
    localLipschitz: ({ examplesPerPass }) => networkLipschitz(model, images, { examplesPerPass }),
  };
}

/**
 * Checks that the model is a text model and that ids and mask are a non-empty int32 [b, n]
 * and a [b, n] mask.
 *
 * @throws RangeError naming `who`.
 */
export function checkText(model: TextClassifier, inputs: TextInputs, who: string): void {
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

/** Rows of t (the first axis) at the given indices, as a new tensor. */
function gatherRows(t: tf.Tensor, rows: readonly number[]): tf.Tensor {
  return tf.tidy(() => tf.gather(t, tf.tensor1d(Int32Array.from(rows), "int32")));
}

/** The mask as float32 [b, n, 1] (1 = real). */
function mask3(mask: tf.Tensor): tf.Tensor {
  return tf.tidy(() => tf.expandDims(tf.cast(tf.notEqual(mask, 0), "float32"), 2));
}

/**
 * Logits from token embeddings (inference mode): E -> f(E + pos[0..n) (+ type[0]), mask), the
 * model's own embedding sum (TextClassifier.embedTokens), so that at E = tok[ids] they are
 * model.forward(ids)'s logits (a BERT's token-type embedding included).
 *
 * @param mask [b, n] of the batch the function will be called with.
 * @returns E float32 [b, n, d] -> logits float32 [b, classes].
 * @example embeddingLogits(model, mask)(model.tokenEmbeddings(ids)) // logits [b, classes]
 */
export function embeddingLogits(model: TextClassifier, mask: tf.Tensor): LogitsFn {
  return (e) =>
    tf.tidy(
      () => model.forwardFromEmbeddings(model.embedTokens(e), { mask, training: false }).logits,
    );
}

/**
 * A text batch in embedding space: x = tok[ids] (computed on first use, owned by the batch),
 * padding rows masked, no clipping. ids and mask are not disposed unless `owned`.
 *
 * @example const b = embeddingBatch(model, { ids, mask }); b.x.shape // [b, n, d]
 */
export function embeddingBatch(
  model: TextClassifier,
  inputs: TextInputs,
  owned = false,
): InputBatch {
  const { ids, mask } = inputs;
  let e0: tf.Tensor | null = null;
  let m3: tf.Tensor | null = null;
  return {
    size: ids.shape[0] as number,
    get x() {
      return (e0 ??= tf.keep(model.tokenEmbeddings(ids)));
    },
    clip: NO_CLIP,
    logits: embeddingLogits(model, mask),
    cleanLogits: () => model.forward(ids, { mask }).logits,
    predictClean: () => predictClasses((i) => model.forward(i, { mask }).logits, ids),
    mask: (delta) => tf.mul(delta, (m3 ??= tf.keep(mask3(mask)))),
    // The sub-batch looks its token embeddings up again: the same rows of the same table.
    select: (rows) =>
      embeddingBatch(model, { ids: gatherRows(ids, rows), mask: gatherRows(mask, rows) }, true),
    dispose: () => {
      tf.dispose([e0, m3].filter((t): t is tf.Tensor => t !== null));
      if (owned) tf.dispose([ids, mask]);
    },
  };
}

/** Real tokens per row of a mask [b, n] (JS side): the index after the last real token. */
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

/**
 * Text examples in token-embedding space (see the module comment): each batch is trimmed to
 * its longest real row (padding columns do not change the logits). ids and mask are not
 * copied or disposed.
 *
 * @throws RangeError naming `who` on a non-text model or malformed ids / mask.
 * @example const space = embeddingSpace(model, { ids, mask }); space.clip // NO_CLIP
 */
export function embeddingSpace(
  model: TextClassifier,
  inputs: TextInputs,
  who = "embeddingSpace",
): InputSpace {
  checkText(model, inputs, who);
  const lengths = rowLengths(inputs.mask);
  const trimmed = (start: number, size: number): TextInputs => {
    const len = Math.max(1, ...lengths.subarray(start, start + size));
    return {
      ids: tf.slice(inputs.ids, [start, 0], [size, len]),
      mask: tf.slice(inputs.mask, [start, 0], [size, len]),
    };
  };
  return {
    kind: "embedding",
    count: inputs.ids.shape[0] as number,
    classes: model.config.classes,
    clip: NO_CLIP,
    check: () => {},
    batch: (start, size) => embeddingBatch(model, trimmed(start, size), true),
    localLipschitz: ({ batchSize, examplesPerPass }) => {
      const n = inputs.ids.shape[0] as number;
      const out = new Float64Array(n);
      for (let start = 0; start < n; start += batchSize) {
        const size = Math.min(batchSize, n - start);
        const { ids, mask } = trimmed(start, size);
        try {
          out.set(networkLipschitz(model, ids, { mask, examplesPerPass }), start);
        } finally {
          tf.dispose([ids, mask]);
        }
      }
      return out;
    },
  };
}
