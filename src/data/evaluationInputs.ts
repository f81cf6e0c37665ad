import { InputError } from "../util/errors.ts";
import { loadDataset, selectExamples, type ImageSplit } from "./dataset.ts";
import { fingerprintSet, heldOutPositions, type Fingerprints } from "./fingerprints.ts";
import { changedDataError, checkHeldOut, describeSplit, indexDigest, type EvaluationSplit } from "./heldOut.ts";
import { absolutePath } from "./identity.ts";
import { parseSpec } from "./sources/index.ts";
import {
  loadTextDataset,
  selectTextExamples,
  type LoadTextDatasetOptions,
  type TextSplit,
} from "./text/dataset.ts";

/**
 * The test examples a command evaluates a model on, chosen one way for every command
 * (analyze, attack, the demo and whatever evaluates a checkpoint): a checkpoint is evaluated
 * on its OWN held-out test split (its data, split seed and sizes, digests checked, no index
 * shared with its training split), never on a split rebuilt from the command's --seed.
 *
 * Which data is the checkpoint's own is decided by content, not by how the spec is spelled
 * ({@link chooseData}): data whose content digest (data/identity.ts) is the one train_state.json
 * records is the checkpoint's own, at whatever path; other content at the path it was trained
 * on is data changed since training, and refused; a checkpoint that records no content digest
 * compares absolute paths.
 *
 * Whatever the data, a test example whose model input equals one of the checkpoint's training
 * inputs (data/fingerprints.ts) is left out: a duplicate in the corpus, or the training data
 * re-sorted, appended to or re-exported in another format, is never evaluated as held out.
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
  /** Sizes of the split it was trained with (checked against the rebuilt split). */
  trainCount?: number;
  testCount?: number;
  /** The content digest of the data it was trained on (data/identity.ts; older checkpoints: none). */
  contentDigest?: string;
  /** The absolute path of its data file or folder at training (older checkpoints: none). */
  path?: string;
  labels?: string[];
  textColumn?: string | null;
  labelColumn?: string | null;
  encoding?: string | null;
  /**
   * The fingerprints of its training inputs (the checkpoint's fingerprints.json; null or absent:
   * older checkpoints, whose training inputs are then known only on their own data).
   */
  trainingInputs?: Fingerprints | null;
}

/**
 * A loaded checkpoint's data record as the evaluation split needs it: its train_state.json
 * data with the training seed, and the fingerprints of its training inputs.
 *
 * @example trainedData(await loadCheckpoint("runs/base")).seed
 */
export function trainedData(ckpt: {
  trainState: { seed: number; data: Omit<TrainedData, "seed" | "trainingInputs"> };
  trainingInputs: { fingerprints: Fingerprints } | null;
}): TrainedData {
  return { ...ckpt.trainState.data, seed: ckpt.trainState.seed, trainingInputs: ckpt.trainingInputs?.fingerprints ?? null };
}

/** Options of {@link imageEvaluationSplit} and {@link textEvaluationSplit}. */
export interface EvaluationRequest {
  /** The command, for messages ("analyze", "attack"). */
  who: string;
  /** --data as given (undefined: the checkpoint's own data, else the default). */
  data: string | undefined;
  /** The checkpoint's data record; null for a random-init or imported model. */
  trained: TrainedData | null;
  /** A model attnlip did not train (a Hugging Face folder): the split record says so (origin "imported"). */
  imported?: boolean;
  /** Split seed for a random-init model or data other than the checkpoint's. */
  seed: number;
  /** Examples wanted (the first n held-out ones of the test split); fewer are used when fewer are held out. */
  n: number;
}

/** A chosen image evaluation split. */
export interface ImageEvaluation {
  spec: string;
  /** The first n test examples. */
  split: ImageSplit;
  /** The data set's valid pixel range [low, high] (attacks clip to it; eps limits come from it). */
  range: readonly [number, number];
  /** The data set's number of classes (labels 0..classes-1). */
  classes: number;
  info: EvaluationSplit;
}

/** A chosen text evaluation split (encoded with the given or built tokenizer). */
export interface TextEvaluation {
  spec: string;
  split: TextSplit;
  labelNames: string[];
  info: EvaluationSplit;
}

/**
 * Whether `spec` names the same place as the checkpoint's data: the same source and, for a
 * file or folder, the same absolute path (the recorded one, else the recorded spec's argument
 * resolved against the current folder); null when it names another source (or none).
 */
function samePlace(spec: string, trained: TrainedData): boolean | null {
  let asked, recorded;
  try {
    asked = parseSpec(spec);
    recorded = parseSpec(trained.spec);
  } catch {
    return null;
  }
  if (asked.source !== recorded.source) return null;
  if (asked.arg === null || recorded.arg === null) return asked.arg === recorded.arg;
  return absolutePath(asked.arg) === (trained.path ?? absolutePath(recorded.arg));
}

/** Loaded data as {@link chooseData} compares it. */
interface Identified {
  spec: string;
  contentDigest: string;
}

/**
 * Loads the data a command evaluates a model on, and decides whether it is the checkpoint's own
 * training data (then loaded with the checkpoint's seed, limits and reading options), by
 * content:
 *
 * - no checkpoint, or another source: other data;
 * - the checkpoint records a content digest: data with that digest is its own, whatever the
 *   path or its spelling; other content at the path it was trained on is refused as changed
 *   since training; other content elsewhere is other data;
 * - no content digest recorded (older checkpoints): the same absolute path is its own data.
 *
 * @param loadOwn loads with the checkpoint's settings; @param loadOther with the command's.
 * @returns the data, whether it is the checkpoint's, and whether its content was compared.
 * @throws InputError from the loaders, or (changedDataError) when the checkpoint's data changed.
 */
async function chooseData<D extends Identified>(
  who: string,
  spec: string,
  trained: TrainedData | null,
  loadOwn: () => Promise<D>,
  loadOther: () => Promise<D>,
): Promise<{ data: D; own: boolean; contentChecked: boolean }> {
  const place = trained === null ? null : samePlace(spec, trained);
  if (trained === null || place === null) return { data: await loadOther(), own: false, contentChecked: false };
  const recorded = trained.contentDigest;
  if (recorded === undefined)
    return place
      ? { data: await loadOwn(), own: true, contentChecked: false }
      : { data: await loadOther(), own: false, contentChecked: false };
  if (place) {
    const data = await loadOwn();
    if (data.contentDigest !== recorded) throw changedDataError(who, data.spec, data.contentDigest, recorded);
    return { data, own: true, contentChecked: true };
  }
  // Elsewhere: the checkpoint's data under another path or spelling, or other data. Read it as
  // the checkpoint read its data; other data may not even read that way (columns, labels).
  let own: D | null = null;
  try {
    own = await loadOwn();
  } catch (e) {
    if (!(e instanceof InputError)) throw e;
  }
  if (own !== null && own.contentDigest === recorded) return { data: own, own: true, contentChecked: true };
  return { data: await loadOther(), own: false, contentChecked: false };
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
  checks: { digestsChecked: boolean; contentChecked: boolean; leftOut: number; inputsChecked: boolean },
): EvaluationSplit {
  return {
    spec,
    origin,
    splitSeed,
    trainCount,
    testCount,
    evaluated: evaluated.length,
    evaluatedDigest: indexDigest(evaluated),
    ...checks,
    indices: Array.from(evaluated),
  };
}

/**
 * The first n held-out test examples of a loaded data set (image or text alike): test examples
 * whose input equals a training input of the checkpoint are left out (its own data: the
 * rebuilt training split's inputs; other data: its recorded fingerprints), the rest checked to
 * be held out by index when it is the checkpoint's own data; and the record that says which
 * split they are.
 *
 * @throws InputError on an empty test split, one whose every input is a training input, or an
 *   evaluated training example.
 */
function heldOutPart<S extends ImageSplit | TextSplit>(
  request: EvaluationRequest,
  data: { spec: string; train: S; test: S },
  own: boolean,
  contentChecked: boolean,
  select: (split: S, positions: number[]) => S,
): { split: S; info: EvaluationSplit } {
  const { who, trained } = request;
  if (data.test.count === 0)
    throw new InputError(
      `${who}: --data: the test split of ${data.spec} holds no examples` +
        (/^(csv|jsonl):/.test(data.spec)
          ? ` (the file's ${data.train.count} record(s) all went to training: the seeded split sets about a fifth of each class aside for testing, and classes this small get none; give more records)`
          : ""),
    );
  const seen: Fingerprints | null =
    trained === null ? null : own ? fingerprintSet(data.train) : (trained.trainingInputs ?? null);
  const { kept, seen: leftOut } = heldOutPositions(data.test, seen);
  if (kept.length === 0)
    throw new InputError(
      `${who}: --data: every one of the ${data.test.count} test examples of ${data.spec} has the same input as a training example of this checkpoint; nothing held out to evaluate`,
    );
  const split = select(data.test, kept.slice(0, request.n));
  const checks = { digestsChecked: false, contentChecked: false, leftOut: leftOut.length, inputsChecked: seen !== null };
  if (!own || trained === null) {
    const origin = trained !== null ? "other-data" : request.imported === true ? "imported" : "random-init";
    return { split, info: evaluationInfo(data.spec, origin, request.seed, 0, data.test.count, split.indices, checks) };
  }
  checkHeldOut(who, data.spec, trained, data.train.indices, data.test.indices, split.indices);
  checks.digestsChecked = trained.trainDigest !== undefined;
  checks.contentChecked = contentChecked;
  return {
    split,
    info: evaluationInfo(data.spec, "checkpoint", trained.seed, data.train.count, data.test.count, split.indices, checks),
  };
}

/**
 * The image test examples to evaluate: for a checkpoint on its own data (by content, see
 * {@link chooseData}), its held-out split rebuilt with its seed and sizes and checked
 * (data/heldOut.ts checkHeldOut); for other data
 * or a random-init model, the test split by `seed`. Prints nothing: {@link describeSplit}
 * says which split it is.
 *
 * @returns the first n held-out test examples (fewer when fewer are held out: test examples
 *   whose input equals a training input of the checkpoint are left out), their spec and the
 *   split record.
 * @throws InputError on a bad spec or n, unreadable data, an empty test split, a checkpoint
 *   whose data changed since training (another content digest at its path) or whose rebuilt
 *   split differs from the recorded one (sizes, digests), an evaluated training example, or
 *   a test split whose every input is a training input.
 * @example
 *   const { split, info } = await imageEvaluationSplit({ who: "analyze", data: undefined, trained: null, seed: 0, n: 16 });
 *   describeSplit(info); // "test split of mnist (random-init model, split seed 0, 2000 test); evaluating the first 16 held out (...)"
 */
export async function imageEvaluationSplit(request: EvaluationRequest): Promise<ImageEvaluation> {
  const { who, trained } = request;
  checkN(who, request.n);
  const spec = request.data ?? trained?.spec ?? "mnist";
  const { data, own, contentChecked } = await chooseData(
    who,
    spec,
    trained,
    () =>
      loadDataset(spec, {
        seed: trained!.seed,
        limit: trained!.limit ?? undefined,
        testLimit: trained!.testLimit ?? undefined,
      }),
    () => loadDataset(spec, { seed: request.seed }),
  );
  const { split, info } = heldOutPart(request, data, own, contentChecked, selectExamples);
  return { spec: data.spec, split, range: data.range, classes: data.classes, info };
}

/**
 * Whether text data is evaluated record by record in file order: for an imported model (nothing
 * to hold out) on a user's file (csv:, jsonl:); an embedded corpus, stored ordered by class,
 * gets its seeded test split.
 *
 * @example readsInFileOrder("csv:mail.csv", true) // true
 * @example readsInFileOrder("spam", true) // false
 */
export function readsInFileOrder(spec: string, imported: boolean): boolean {
  return imported && parseSpec(spec, "text").arg !== null;
}

/**
 * The text test examples to evaluate, chosen as {@link imageEvaluationSplit} chooses images,
 * encoded with `text.tokenizer` (a checkpoint's) or with one built from the training split.
 *
 * @param text loading options: the model's number of classes, tokenizer, vocabSize,
 *   maxLength, labelNames, columns and encoding (the checkpoint's own data: its columns and
 *   encoding where these are not given).
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
  const fileOrder = readsInFileOrder(spec, request.imported === true);
  const { data, own, contentChecked } = await chooseData(
    who,
    spec,
    trained,
    () =>
      loadTextDataset(spec, {
        ...text,
        // The checkpoint's data is read as it was at training, unless the command says otherwise.
        textColumn: text.textColumn ?? trained!.textColumn ?? undefined,
        labelColumn: text.labelColumn ?? trained!.labelColumn ?? undefined,
        encoding: text.encoding ?? trained!.encoding ?? undefined,
        seed: trained!.seed,
        limit: trained!.limit ?? undefined,
        testLimit: trained!.testLimit ?? undefined,
      }),
    // Not the checkpoint's data: its training split is never read, so only the test split is tokenized (a random-init model builds its vocabulary from it).
    () => loadTextDataset(spec, { ...text, seed: request.seed, fileOrder, testOnly: text.tokenizer !== undefined }),
  );
  if (data.classes > text.classes)
    throw new InputError(
      `${who}: data ${data.spec}: ${data.classes} classes (${data.labelNames.join(", ")}), the model has ${text.classes}`,
    );
  const { split, info } = heldOutPart(request, data, own, contentChecked, selectTextExamples);
  if (fileOrder) info.order = "file";
  return { spec: data.spec, split, labelNames: data.labelNames, info };
}

export { describeSplit };
