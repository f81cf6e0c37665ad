import { createHash } from "node:crypto";
import { InputError } from "../util/errors.ts";
import { counted } from "../util/format.ts";
import { dataName, shortDigest } from "./identity.ts";

/**
 * Held-out evaluation: which examples of a data set a model was trained on, which it may be
 * evaluated on, and the checks that keep the two apart.
 *
 * Every split in attnlip carries the indices of its examples in the data set's own numbering
 * (embedded MNIST: the digit's position in the `mnist` package, class by class; IDX and
 * CIFAR-10: the training file's records first, then the test file's; text: the record's
 * position in the corpus or file). A checkpoint records the seed and sizes of its split, a
 * digest of its training and test indices and the content digest of its data
 * (data/identity.ts). Every command that evaluates a checkpoint decides by content whether the
 * data asked for is the checkpoint's own (data/evaluationInputs.ts), refuses data changed since
 * training, rebuilds the split, checks its sizes and digests (a data file edited since training
 * would shuffle differently and could put training examples in the "test" split) and that no
 * evaluated index is a training index, and says which split it used. Whatever the data, a test
 * example whose input equals a training input (data/fingerprints.ts) is left out and counted.
 */

/** Digests of the training and test indices a checkpoint used, as train_state.json records them. */
export interface SplitDigests {
  /** {@link indexDigest} of the training split's indices. */
  trainDigest: string;
  /** {@link indexDigest} of the test split's indices. */
  testDigest: string;
}

/** What train_state.json records about a split, as {@link checkRebuiltSplit} checks it. */
export interface RecordedSplit extends Partial<SplitDigests> {
  /** Sizes of the training and test splits (after --limit / --test-limit). */
  trainCount?: number;
  testCount?: number;
}

/** What an evaluation says about the examples it used (written to analysis.json and attack.json). */
export interface EvaluationSplit {
  /** The data spec evaluated ("mnist", "idx:DIR", "spam", "csv:FILE", ...). */
  spec: string;
  /**
   * How the test split was chosen: "checkpoint" = the checkpoint's own held-out split (same
   * data, seed and sizes as training, digests checked); "other-data" = a checkpoint evaluated
   * on data other than its training data; "random-init" = no training at all (split by seed);
   * "imported" = a model attnlip did not train (a Hugging Face folder): its training data is
   * unknown, so nothing can be held out (split by seed).
   */
  origin: "checkpoint" | "other-data" | "random-init" | "imported";
  /** Seed of the train/test split (the checkpoint's training seed for "checkpoint"). */
  splitSeed: number;
  /**
   * "file": every record of the data in file order, not split (an imported text model: nothing
   * to hold out); absent: a seeded split.
   */
  order?: "file";
  /** Size of the training split the model saw (0 for "random-init" and "other-data"). */
  trainCount: number;
  /** Size of the test split the evaluated examples come from. */
  testCount: number;
  /** Examples evaluated: the first `evaluated` of the test split. */
  evaluated: number;
  /** {@link indexDigest} of the evaluated examples' indices. */
  evaluatedDigest: string;
  /** Whether the checkpoint's recorded digests were there to check (older checkpoints have none). */
  digestsChecked: boolean;
  /**
   * Whether the data was recognised as the checkpoint's by its content digest (data/identity.ts;
   * false: the checkpoint records none, and the data's path was compared). Absent in files
   * written before it was recorded.
   */
  contentChecked?: boolean;
  /**
   * Test examples left out because their model input equals a training input of the
   * checkpoint (data/fingerprints.ts: a duplicate in the corpus, or a copy of the training
   * data in another file or order); the evaluated ones are the first held-out ones. Absent in
   * files written before it was checked.
   */
  leftOut?: number;
  /**
   * Whether the checkpoint's training inputs were known to check against (its own data: the
   * rebuilt training split; other data: the checkpoint's fingerprints.json, absent in older
   * checkpoints); always false for a random-init model.
   */
  inputsChecked?: boolean;
  /** The indices of the evaluated examples (the data set's own numbering). */
  indices: number[];
}

/**
 * A short, stable digest of a list of example indices: SHA-256 of the indices as 32-bit
 * little-endian integers, as "sha256:" and the first 16 hex digits.
 *
 * @param indices non-negative integers (order matters: a split and its shuffle differ).
 * @throws RangeError on a negative or non-integer index.
 * @example indexDigest([0, 1, 2]) // "sha256:..." (16 hex digits)
 */
export function indexDigest(indices: ArrayLike<number>): string {
  const view = new DataView(new ArrayBuffer(4 * indices.length));
  for (let i = 0; i < indices.length; i++) {
    const v = indices[i];
    if (!Number.isInteger(v) || v < 0 || v > 0x7fffffff)
      throw new RangeError(
        `indexDigest: index ${i} must be a non-negative 32-bit integer, got ${v}`,
      );
    view.setInt32(4 * i, v, true); // little-endian, whatever the platform
  }
  return (
    "sha256:" + createHash("sha256").update(new Uint8Array(view.buffer)).digest("hex").slice(0, 16)
  );
}

/** Both digests of a split, for train_state.json. */
export function splitDigests(train: ArrayLike<number>, test: ArrayLike<number>): SplitDigests {
  return { trainDigest: indexDigest(train), testDigest: indexDigest(test) };
}

/**
 * The refusal of data whose content changed since training: one line naming the file (or
 * folder, or embedded set) and both content digests.
 *
 * @param who the command ("analyze", "attack", "resume").
 * @example changedDataError("analyze", "csv:d.csv", "sha256:1...", "sha256:2...").message
 *   // "analyze: the data file d.csv changed since training (content sha256:1…, train_state.json records sha256:2…); ..."
 */
export function changedDataError(
  who: string,
  spec: string,
  actual: string,
  recorded: string,
): InputError {
  return new InputError(
    `${who}: ${dataName(spec)} changed since training (content ${shortDigest(actual)}, train_state.json records ${shortDigest(recorded)}); which of its examples the checkpoint was trained on is unknown, so it is refused`,
  );
}

/**
 * Checks that a split rebuilt from a checkpoint's data, seed and limits is the one it was
 * trained with: both split digests or neither recorded, the recorded sizes, the digests.
 *
 * @param who the command, for messages ("analyze", "attack", "resume").
 * @param spec the data spec, for messages.
 * @param recorded what train_state.json records (undefined, or without digests, for
 *   checkpoints written before they were recorded).
 * @param train indices of the rebuilt training split; @param test of the rebuilt test split.
 * @returns whether digests were there to check.
 * @throws InputError when only one of the two digests is recorded (an edited train_state.json
 *   cannot be checked), a size or a digest differs (the data changed since training, or the
 *   record was edited).
 */
export function checkRebuiltSplit(
  who: string,
  spec: string,
  recorded: RecordedSplit | undefined,
  train: ArrayLike<number>,
  test: ArrayLike<number>,
): boolean {
  const hasTrain = recorded?.trainDigest !== undefined;
  const hasTest = recorded?.testDigest !== undefined;
  if (hasTrain !== hasTest)
    throw new InputError(
      `${who}: the checkpoint records ${hasTrain ? "trainDigest" : "testDigest"} but not ${hasTrain ? "testDigest" : "trainDigest"}; both split digests are needed to check its held-out split (train_state.json edited?)`,
    );
  for (const [name, recordedCount, rebuilt] of [
    ["training", recorded?.trainCount, train.length],
    ["test", recorded?.testCount, test.length],
  ] as const)
    if (recordedCount !== undefined && recordedCount !== rebuilt)
      throw new InputError(
        `${who}: the ${name} split of ${spec} rebuilt from the checkpoint's seed and limits has ${rebuilt} examples, train_state.json records ${recordedCount}; the data or the record changed since training`,
      );
  if (recorded?.trainDigest !== undefined && recorded.trainDigest !== indexDigest(train))
    throw new InputError(
      `${who}: the training split of ${spec} rebuilt from the checkpoint's seed is not the one it was trained on (digest ${indexDigest(train)}, recorded ${recorded.trainDigest}); the data changed since training, so its held-out examples are unknown`,
    );
  if (recorded?.testDigest !== undefined && recorded.testDigest !== indexDigest(test))
    throw new InputError(
      `${who}: the test split of ${spec} rebuilt from the checkpoint's seed is not the one recorded at training (digest ${indexDigest(test)}, recorded ${recorded.testDigest}); the data changed since training`,
    );
  return hasTrain;
}

/**
 * Checks that a rebuilt split is the one a checkpoint was trained with
 * ({@link checkRebuiltSplit}), and that the examples to evaluate are held out.
 *
 * @param who the command, for messages ("analyze", "attack").
 * @param spec the data spec, for messages.
 * @param recorded the checkpoint's digests and sizes (undefined for checkpoints written before
 *   they were recorded: only the overlap check runs).
 * @param train indices of the rebuilt training split; @param test of the rebuilt test split.
 * @param evaluated indices about to be evaluated.
 * @throws InputError as {@link checkRebuiltSplit}, or when an evaluated index is a training
 *   index.
 */
export function checkHeldOut(
  who: string,
  spec: string,
  recorded: RecordedSplit | undefined,
  train: ArrayLike<number>,
  test: ArrayLike<number>,
  evaluated: ArrayLike<number>,
): void {
  checkRebuiltSplit(who, spec, recorded, train, test);
  const seen = new Set<number>();
  for (let i = 0; i < train.length; i++) seen.add(train[i]);
  let overlap = 0;
  let first = -1;
  for (let i = 0; i < evaluated.length; i++)
    if (seen.has(evaluated[i])) {
      overlap++;
      if (first < 0) first = evaluated[i];
    }
  if (overlap > 0)
    throw new InputError(
      `${who}: ${overlap} of the ${evaluated.length} examples to evaluate were training examples of this checkpoint (first: index ${first} of ${spec}); refusing to evaluate on training data`,
    );
}

/**
 * The evaluated examples' digest as the line shows it: a digest of their indices in the split
 * ({@link indexDigest}), not of their content, so it says so.
 */
function indicesDigest(digest: string): string {
  return `digest of their indices: ${digest}`;
}

/**
 * One line saying which examples an evaluation used.
 *
 * @example describeSplit(split)
 *   // "held-out test split of mnist (the checkpoint's: seed 5, 4000 train / 2000 test, content and digests checked); evaluating the first 12 held out (digest of their indices: sha256:0123456789abcdef)"
 */
export function describeSplit(split: Omit<EvaluationSplit, "indices">): string {
  const leftOut =
    split.leftOut !== undefined && split.leftOut > 0
      ? `; ${split.leftOut} test example${split.leftOut === 1 ? " of the split whose input equals a training input is" : "s of the split whose input equals a training input are"} left out before the first are chosen`
      : "";
  const unchecked =
    split.origin === "other-data" && split.inputsChecked === false
      ? "; the checkpoint records no training fingerprints, so a copy of its training inputs in this data is not recognised"
      : "";
  const first = `evaluating the first ${split.evaluated} held out (${indicesDigest(split.evaluatedDigest)})${leftOut}${unchecked}`;
  if (split.origin === "checkpoint") {
    const checked = split.digestsChecked
      ? split.contentChecked === true
        ? "content and digests checked"
        : "digests checked"
      : split.contentChecked === true
        ? "content checked, no digests recorded, overlap checked"
        : "no digests recorded, overlap checked";
    return (
      `held-out test split of ${split.spec} (the checkpoint's: seed ${split.splitSeed}, ${split.trainCount} train / ${split.testCount} test, ` +
      `${checked}); ${first}`
    );
  }
  if (split.origin === "other-data")
    return `test split of ${split.spec} (not the checkpoint's training data; split seed ${split.splitSeed}, ${split.testCount} test); ${first}`;
  if (split.origin === "imported" && split.order === "file")
    return `the records of ${split.spec} in file order (imported model, not trained by attnlip: its training data is unknown, so these may include texts it was trained on; ${counted(split.testCount, "record")}); evaluating the first ${split.evaluated} (${indicesDigest(split.evaluatedDigest)})`;
  if (split.origin === "imported")
    return `test split of ${split.spec} (imported model, not trained by attnlip: its training data is unknown, so these examples may include some it was trained on; split seed ${split.splitSeed}, ${split.testCount} test); evaluating the first ${split.evaluated} (${indicesDigest(split.evaluatedDigest)})`;
  return `test split of ${split.spec} (random-init model, split seed ${split.splitSeed}, ${split.testCount} test); ${first}`;
}
