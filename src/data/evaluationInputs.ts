import { InputError } from "../util/errors.ts";
import { loadDataset, takeFirst, type ImageSplit } from "./dataset.ts";
import { checkHeldOut, describeSplit, indexDigest, type EvaluationSplit } from "./heldOut.ts";
import { parseSpec } from "./sources/index.ts";
import {
  loadTextDataset,
  takeFirstText,
  type LoadTextDatasetOptions,
  type TextSplit,
} from "./text/dataset.ts";

/**
 * The test examples a command evaluates a model on, chosen one way for every command
 * (analyze, attack, the demo and whatever evaluates a checkpoint): a checkpoint is evaluated
 * on its OWN held-out test split (its data, split seed and sizes, digests checked, no index
 * shared with its training split), never on a split rebuilt from the command's --seed.
 */

/** What a checkpoint's train_state.json says about its data (a structural view of TrainState.data). */
export interface TrainedData {
  /** The training seed (it also seeded the split). */
  seed: number;
  spec: string;
  limit: number | null;
  testLimit: number | null;
  trainDigest?: string;
  testDigest?: string;
  labels?: string[];
  textColumn?: string | null;
  labelColumn?: string | null;
  encoding?: string | null;
}

/** Options of {@link imageEvaluationSplit} and {@link textEvaluationSplit}. */
export interface EvaluationRequest {
  /** The command, for messages ("analyze", "attack"). */
  who: string;
  /** --data as given (undefined: the checkpoint's own data, else the default). */
  data: string | undefined;
  /** The checkpoint's data record; null for a random-init model. */
  trained: TrainedData | null;
  /** Split seed for a random-init model or data other than the checkpoint's. */
  seed: number;
  /** Examples wanted (the first n of the test split); fewer are used when the split is smaller. */
  n: number;
}

/** A chosen image evaluation split. */
export interface ImageEvaluation {
  spec: string;
  /** The first n test examples. */
  split: ImageSplit;
  info: EvaluationSplit;
}

/** A chosen text evaluation split (encoded with the given or built tokenizer). */
export interface TextEvaluation {
  spec: string;
  split: TextSplit;
  labelNames: string[];
  info: EvaluationSplit;
}

/** Normalises a data spec so "mnist" and a checkpoint's recorded spec compare equal. */
function sameData(spec: string, trained: TrainedData | null): boolean {
  if (trained === null) return false;
  const norm = (s: string) => {
    try {
      return parseSpec(s).spec;
    } catch {
      return s;
    }
  };
  return norm(spec) === norm(trained.spec);
}

function checkN(who: string, n: number): void {
  if (!Number.isSafeInteger(n) || n < 1)
    throw new InputError(`${who}: --n must be a positive integer, got ${n}`);
}

function evaluationInfo(
  spec: string,
  origin: EvaluationSplit["origin"],
  splitSeed: number,
  trainCount: number,
  testCount: number,
  evaluated: Int32Array,
  digestsChecked: boolean,
): EvaluationSplit {
  return {
    spec,
    origin,
    splitSeed,
    trainCount,
    testCount,
    evaluated: evaluated.length,
    evaluatedDigest: indexDigest(evaluated),
    digestsChecked,
    indices: Array.from(evaluated),
  };
}

/**
 * The image test examples to evaluate: for a checkpoint on its own data, its held-out split
 * rebuilt with its seed and sizes and checked (data/heldOut.ts checkHeldOut); for other data
 * or a random-init model, the test split by `seed`. Prints nothing: {@link describeSplit}
 * says which split it is.
 *
 * @returns the first min(n, test size) test examples, their spec and the split record.
 * @throws InputError on a bad spec or n, unreadable data, an empty test split, a checkpoint
 *   whose rebuilt split differs from the recorded one, or an evaluated training example.
 * @example
 *   const { split, info } = await imageEvaluationSplit({ who: "analyze", data: undefined, trained: null, seed: 0, n: 16 });
 *   describeSplit(info); // "test split of mnist (random-init model, split seed 0, 2000 test); evaluating the first 16 (...)"
 */
export async function imageEvaluationSplit(request: EvaluationRequest): Promise<ImageEvaluation> {
  const { who, trained } = request;
  checkN(who, request.n);
  const spec = request.data ?? trained?.spec ?? "mnist";
  const own = sameData(spec, trained);
  const data = own
    ? await loadDataset(spec, {
        seed: trained!.seed,
        limit: trained!.limit ?? undefined,
        testLimit: trained!.testLimit ?? undefined,
      })
    : await loadDataset(spec, { seed: request.seed });
  if (data.test.count === 0)
    throw new InputError(`${who}: --data: the test split of ${data.spec} holds no examples`);
  const split = takeFirst(data.test, Math.min(request.n, data.test.count));
  if (own)
    checkHeldOut(who, data.spec, trained!, data.train.indices, data.test.indices, split.indices);
  const info = own
    ? evaluationInfo(
        data.spec,
        "checkpoint",
        trained!.seed,
        data.train.count,
        data.test.count,
        split.indices,
        trained!.trainDigest !== undefined,
      )
    : evaluationInfo(
        data.spec,
        trained === null ? "random-init" : "other-data",
        request.seed,
        0,
        data.test.count,
        split.indices,
        false,
      );
  return { spec: data.spec, split, info };
}

/**
 * The text test examples to evaluate, chosen as {@link imageEvaluationSplit} chooses images,
 * encoded with `text.tokenizer` (a checkpoint's) or with one built from the training split.
 *
 * @param text loading options: the model's number of classes, tokenizer, vocabSize,
 *   maxLength, labelNames, columns.
 * @throws InputError as {@link imageEvaluationSplit} and loadTextDataset, or when the data
 *   has more classes than the model.
 */
export async function textEvaluationSplit(
  request: EvaluationRequest,
  text: Omit<LoadTextDatasetOptions, "seed" | "limit" | "testLimit"> & { classes: number },
): Promise<TextEvaluation> {
  const { who, trained } = request;
  checkN(who, request.n);
  const spec = request.data ?? trained?.spec ?? "spam";
  const own = sameData(spec, trained);
  const data = await loadTextDataset(
    spec,
    own
      ? {
          ...text,
          seed: trained!.seed,
          limit: trained!.limit ?? undefined,
          testLimit: trained!.testLimit ?? undefined,
        }
      : { ...text, seed: request.seed },
  );
  if (data.classes > text.classes)
    throw new InputError(
      `${who}: data ${data.spec}: ${data.classes} classes (${data.labelNames.join(", ")}), the model has ${text.classes}`,
    );
  if (data.test.count === 0)
    throw new InputError(`${who}: --data: the test split of ${data.spec} holds no examples`);
  const split = takeFirstText(data.test, Math.min(request.n, data.test.count));
  if (own)
    checkHeldOut(who, data.spec, trained!, data.train.indices, data.test.indices, split.indices);
  const info = own
    ? evaluationInfo(
        data.spec,
        "checkpoint",
        trained!.seed,
        data.train.count,
        data.test.count,
        split.indices,
        trained!.trainDigest !== undefined,
      )
    : evaluationInfo(
        data.spec,
        trained === null ? "random-init" : "other-data",
        request.seed,
        0,
        data.test.count,
        split.indices,
        false,
      );
  return { spec: data.spec, split, labelNames: data.labelNames, info };
}

export { describeSplit };
