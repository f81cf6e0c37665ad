import type { tf } from "../../backend.ts";
import type { EvaluationRequest } from "../../data/evaluationInputs.ts";
import type { EvaluationSplit } from "../../data/heldOut.ts";
import { specForms, specTask, type DataTask } from "../../data/registry.ts";
import type { TextTokenizer } from "../../data/text/tokenizer.ts";
import type { TransformerClassifier } from "../../nn/model.ts";
import { InputError } from "../../util/errors.ts";
import type { DefaultNorm } from "../defaults.ts";
import type { InputSpace } from "../inputSpace.ts";
import type { ClipRange } from "../loss.ts";

/**
 * What a kind of model is evaluated on, said once so that the commands that evaluate a model
 * (analyze, attack, the demo) have one path for every kind: which data it reads, how its
 * held-out test inputs are loaded and checked against the model, the space attacks move in,
 * and the radii that make sense there. One record per model kind (image.ts for ViTs,
 * text.ts for text classifiers), registered by the config's `kind`
 * ({@link registerModelInputs}); a new model kind is one file plus one registration.
 */

/** How a model's data is read besides its spec (text files; ignored by image kinds). */
export interface ReadingOptions {
  /** The checkpoint's tokenizer (text; null or absent: built from the training split). */
  tokenizer?: TextTokenizer | null;
  /**
   * The model's own class names (an imported model's id2label): the data's labels map to these
   * ids (a label outside them is refused); absent or null: sorted order.
   */
  labels?: readonly string[] | null;
  /** Text files: the text / label columns and the encoding (default: the checkpoint's). */
  textColumn?: string;
  labelColumn?: string;
  encoding?: string;
}

/** Held-out test inputs of one model, loaded and checked; the caller disposes them. */
export interface ModelInputs {
  /** The data spec evaluated, normalised. */
  spec: string;
  /** Which examples these are (written as `split` to analysis.json and attack.json). */
  info: EvaluationSplit;
  /** Examples N. */
  count: number;
  /** True classes, int32 [N]. */
  labels: Int32Array;
  /** The model's input for analysis: images float32 [N, H, W, C], or token ids int32 [N, n]. */
  x: tf.Tensor;
  /** The padding mask [N, n] (1 = real token) of text, null for images. */
  mask: tf.Tensor | null;
  /** The space attacks and the Lipschitz proxy move in (pixels, or token embeddings). */
  space: InputSpace;
  /**
   * Checks attack radii against the space (images: at most the pixel range's width in l_inf,
   * its diameter in l_2; the embedding space has no upper limit).
   *
   * @throws InputError `WHO: --eps: E is out of range for --norm N (at most MAX, what MAX is)`.
   */
  checkEps(eps: readonly number[], norm: DefaultNorm, who: string): void;
  /** Frees the tensors. */
  dispose(): void;
}

/** One kind of model's inputs (see the module comment). */
export interface ModelInputKind {
  /** The model config's `kind` it serves ("vit", "text"). */
  modelKind: string;
  /** The data task it reads ("image", "text"). */
  task: DataTask;
  /** The data when neither --data nor a checkpoint names any. */
  defaultData: string;
  /** What the examples are, in "analyzing MODEL on N <noun>". */
  noun: string;
  /** What attacks perturb, in "attacking MODEL on N <attackNoun>". */
  attackNoun: string;
  /** The units of eps and of the proxy radius ("input" = pixels, "embedding"). */
  units: string;
  /** Default attack radii per norm, in those units. */
  defaultEps(norm: DefaultNorm): number[];
  /**
   * Loads the first request.n held-out test inputs (data/evaluationInputs.ts) and checks them
   * against the model.
   *
   * @throws InputError on unreadable data, data that does not fit the model, or a held-out
   *   check that fails.
   */
  load(model: TransformerClassifier, request: EvaluationRequest, reading: ReadingOptions): Promise<ModelInputs>;
  /**
   * The input space of inputs like {@link ModelInputs.x} and .mask (a worker rebuilds it from
   * them), clipped to `clip` where the space has a valid range.
   *
   * @throws RangeError on inputs the space refuses.
   */
  space(model: TransformerClassifier, x: tf.Tensor, mask: tf.Tensor | null, clip: ClipRange): InputSpace;
}

const KINDS = new Map<string, ModelInputKind>();

/**
 * Registers the inputs of a model kind.
 *
 * @throws Error when the model kind already has one.
 * @example registerModelInputs({ ...IMAGE_INPUTS, modelKind: "toy-vit" }) // a ViT variant reading images
 */
export function registerModelInputs(kind: ModelInputKind): ModelInputKind {
  if (KINDS.has(kind.modelKind)) throw new Error(`registerModelInputs: model kind "${kind.modelKind}" already has inputs`);
  KINDS.set(kind.modelKind, kind);
  return kind;
}

/**
 * Removes a registration (tests).
 *
 * @returns whether there was one.
 * @example unregisterModelInputs("toy-vit") // true after the registration above
 */
export function unregisterModelInputs(modelKind: string): boolean {
  return KINDS.delete(modelKind);
}

/**
 * The inputs of a model kind.
 *
 * @throws InputError naming `who` when the kind has none registered.
 * @example modelInputs("text").defaultData // "spam"
 */
export function modelInputs(modelKind: string, who: string): ModelInputKind {
  const kind = KINDS.get(modelKind);
  if (kind === undefined)
    throw new InputError(`${who}: no inputs are registered for a "${modelKind}" model (known: ${[...KINDS.keys()].join(", ")})`);
  return kind;
}

/**
 * Checks that a data spec is of the task the model reads.
 *
 * @throws InputError `WHO: --data: "SPEC" is text data; a vit model reads image data (mnist, ...)`.
 * @example checkDataTask(modelInputs("vit", "me"), "spam", "analyze") // throws
 */
export function checkDataTask(kind: ModelInputKind, spec: string, who: string): void {
  const task = specTask(spec);
  if (task !== null && task !== kind.task)
    throw new InputError(
      `${who}: --data: "${spec}" is ${task} data; a ${kind.modelKind} model reads ${kind.task} data (${specForms(kind.task)})`,
    );
}
