import { z } from "zod";
import { InputError } from "../../util/errors.ts";
import { sliceCodePoints } from "./truncate.ts";
import { firstIssue } from "../../util/zodIssue.ts";

/**
 * A word-level tokenizer with a vocabulary built from training texts.
 *
 * Why not a library: the well-kept WordPiece/BPE trainers for JavaScript are bindings to the
 * Rust `tokenizers` crate that fetch a native binary at install time (not allowed here), or
 * encoders that load a pre-trained vocabulary (a download) without a trainer. A word-level
 * vocabulary (the most frequent words of the training split, everything else [UNK]) is what
 * a 2-block, 8000-word classifier can use anyway, is deterministic, and is 100 lines.
 *
 * Normalisation: Unicode NFKC, lower case; tokens are runs of letters/digits/marks (words,
 * numbers) or single other non-space characters (punctuation, symbols). Ids: [PAD] = 0,
 * [UNK] = 1, [CLS] = 2, then the words by descending count (ties: code-point order).
 */

export const PAD_ID = 0;
export const UNK_ID = 1;
export const CLS_ID = 2;
export const SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]"] as const;

const TOKEN = /[\p{L}\p{N}\p{M}]+|[^\s\p{L}\p{N}\p{M}]/gu;

/**
 * The first `max` tokens of a text (normalised), without building the whole token list of a
 * very long text. Tokens longer than 32 code units are cut to 32 (31 when the 32nd would be
 * half of a surrogate pair: cuts keep whole code points).
 *
 * @param max at most this many tokens (default: all).
 */
export function wordTokens(text: string, max = Infinity): string[] {
  const out: string[] = [];
  if (max <= 0) return out;
  // ~ 40 characters per token is plenty; long texts are cut (on a whole code point) before
  // normalising.
  const cut = Number.isFinite(max) ? sliceCodePoints(text, Math.floor(max * 40)) : text;
  TOKEN.lastIndex = 0;
  const normalised = cut.normalize("NFKC").toLowerCase();
  for (const m of normalised.matchAll(TOKEN)) {
    out.push(sliceCodePoints(m[0], 32));
    if (out.length >= max) break;
  }
  return out;
}

/** tokenizer.json, validated on load. */
export const TokenizerJsonSchema = z.strictObject({
  format: z.literal("attnlip-tokenizer"),
  version: z.literal(1),
  kind: z.literal("word"),
  /** Sequence length including [CLS]; longer texts are truncated. */
  maxLength: z.number().int().min(1),
  /** The token of each id: [PAD], [UNK], [CLS], then words. */
  vocab: z.array(z.string()).min(3),
});

export type TokenizerJson = z.output<typeof TokenizerJsonSchema>;

/** Options of {@link WordTokenizer.train}. */
export interface TrainTokenizerOptions {
  /** Vocabulary size including the 3 special tokens (>= 3). */
  vocabSize: number;
  /** Sequence length including [CLS] (>= 1): texts are read up to maxLength - 1 tokens. */
  maxLength: number;
  /** Words seen fewer times are left out [2]. */
  minCount?: number;
}

/**
 * What the text data pipeline needs of a tokenizer: attnlip's {@link WordTokenizer}, or a
 * Hugging Face tokenizer.json (src/hf/tokenizer.ts).
 */
export interface TextTokenizer {
  /** Longest sequence, special tokens included: longer texts are truncated. */
  readonly maxLength: number;
  /** Vocabulary size (ids are 0..size-1). */
  readonly size: number;
  /**
   * Encodes texts into a padded matrix [count, length] (row-major, padding after each text's
   * tokens; length = `length` or maxLength) and each text's number of real tokens.
   */
  encodeBatch(texts: readonly string[], length?: number): { ids: Int32Array; lengths: Int32Array };
  /** The tokens of ids (for display). */
  decode(ids: ArrayLike<number>): string[];
  /** The tokenizer.json document a checkpoint saves. */
  toJSON(): unknown;
}

/**
 * Token id rows as a padded matrix [count, length] (row-major): each row cut to `length`, then
 * `padId` after it; and each row's length.
 *
 * @example padRows([[2, 7], [2]], 3, 0) // { ids: [2, 7, 0, 2, 0, 0], lengths: [2, 1] }
 */
export function padRows(rows: readonly ArrayLike<number>[], length: number, padId: number): { ids: Int32Array; lengths: Int32Array } {
  const ids = new Int32Array(rows.length * length).fill(padId);
  const lengths = new Int32Array(rows.length);
  rows.forEach((row, i) => {
    const n = Math.min(row.length, length);
    for (let k = 0; k < n; k++) ids[i * length + k] = row[k];
    lengths[i] = n;
  });
  return { ids, lengths };
}

/** A word-level tokenizer (see the module comment). Immutable once built. */
export class WordTokenizer implements TextTokenizer {
  readonly vocab: readonly string[];
  readonly maxLength: number;
  readonly #ids: Map<string, number>;

  /**
   * @param vocab the token of each id, starting with [PAD], [UNK], [CLS]; no duplicates.
   * @param maxLength sequence length including [CLS].
   * @throws InputError on a vocabulary that does not start with the special tokens, has
   *   duplicates, or a bad maxLength.
   */
  constructor(vocab: readonly string[], maxLength: number) {
    if (!Number.isInteger(maxLength) || maxLength < 1)
      throw new InputError(`tokenizer: maxLength must be an integer >= 1, got ${maxLength}`);
    if (vocab.length < 3 || SPECIAL_TOKENS.some((t, i) => vocab[i] !== t))
      throw new InputError(
        `tokenizer: the vocabulary must start with ${SPECIAL_TOKENS.join(", ")}`,
      );
    this.#ids = new Map(vocab.map((w, i) => [w, i]));
    if (this.#ids.size !== vocab.length) {
      const twice = vocab.findIndex((w, i) => this.#ids.get(w) !== i);
      throw new InputError(
        `tokenizer: the vocabulary has duplicate tokens: ${JSON.stringify(vocab[twice])} is id ${twice} and id ${this.#ids.get(vocab[twice])}`,
      );
    }
    this.vocab = vocab;
    this.maxLength = maxLength;
  }

  /**
   * Builds the vocabulary from training texts: the (vocabSize - 3) most frequent tokens among
   * the first maxLength - 1 tokens of each text (what the model reads), seen >= minCount times.
   *
   * @throws InputError on vocabSize < 3 or maxLength < 1.
   */
  static train(texts: Iterable<string>, options: TrainTokenizerOptions): WordTokenizer {
    const { vocabSize, maxLength } = options;
    const minCount = options.minCount ?? 2;
    if (!Number.isInteger(vocabSize) || vocabSize < 3)
      throw new InputError(`tokenizer: vocabSize must be an integer >= 3, got ${vocabSize}`);
    const counts = new Map<string, number>();
    for (const text of texts)
      for (const w of wordTokens(text, maxLength - 1)) counts.set(w, (counts.get(w) ?? 0) + 1);
    for (const s of SPECIAL_TOKENS) counts.delete(s);
    const words = [...counts]
      .filter(([, c]) => c >= minCount)
      .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
      .slice(0, vocabSize - SPECIAL_TOKENS.length)
      .map(([w]) => w);
    return new WordTokenizer([...SPECIAL_TOKENS, ...words], maxLength);
  }

  /** Vocabulary size (ids are 0..size-1). */
  get size(): number {
    return this.vocab.length;
  }

  /** The id of a (normalised) token, [UNK] when unknown. */
  id(token: string): number {
    return this.#ids.get(token) ?? UNK_ID;
  }

  /**
   * Token ids of a text: [CLS] then its first maxLength - 1 tokens (an empty text gives [CLS]).
   *
   * @returns Int32Array of length 1..maxLength, no [PAD].
   */
  encode(text: string): Int32Array {
    const words = wordTokens(text, this.maxLength - 1);
    const out = new Int32Array(words.length + 1);
    out[0] = CLS_ID;
    for (let i = 0; i < words.length; i++) out[i + 1] = this.id(words[i]);
    return out;
  }

  /**
   * Encodes texts into a padded matrix [count, length] (row-major), padding ([PAD] = 0) after
   * each text's tokens; length = `length` or maxLength.
   *
   * @returns {ids: Int32Array [count * length], lengths: Int32Array [count]}.
   */
  encodeBatch(
    texts: readonly string[],
    length = this.maxLength,
  ): { ids: Int32Array; lengths: Int32Array } {
    return padRows(texts.map((t) => this.encode(t)), length, PAD_ID);
  }

  /** The tokens of ids (for display), [PAD] rows included. */
  decode(ids: ArrayLike<number>): string[] {
    return Array.from(ids, (i) => this.vocab[i] ?? "[UNK]");
  }

  /** The tokenizer.json document. */
  toJSON(): TokenizerJson {
    return {
      format: "attnlip-tokenizer",
      version: 1,
      kind: "word",
      maxLength: this.maxLength,
      vocab: [...this.vocab],
    };
  }

  /**
   * A tokenizer from its tokenizer.json document.
   *
   * @throws InputError naming the first problem with the document.
   */
  static fromJSON(json: unknown): WordTokenizer {
    const parsed = TokenizerJsonSchema.safeParse(json);
    if (!parsed.success) {
      throw new InputError(`tokenizer.json: ${firstIssue(parsed.error, json)}`);
    }
    return new WordTokenizer(parsed.data.vocab, parsed.data.maxLength);
  }
}
