import { Tokenizer } from "@huggingface/tokenizers";
import { padRows, type TextTokenizer } from "../data/text/tokenizer.ts";
import { HfImportError } from "./types.ts";

/**
 * A Hugging Face tokenizer.json (WordPiece, byte-level BPE, Unigram...) read with
 * @huggingface/tokenizers, the maintained pure-JavaScript port of the Rust `tokenizers` library,
 * behind attnlip's {@link TextTokenizer}: the tokens and ids the library gives, with the special
 * tokens of the tokenizer's post-processor ([CLS] x [SEP] for BERT; none for GPT-2).
 *
 * Padding: after each text's tokens (right), with the tokenizer's pad id (tokenizer.json
 * `padding.pad_id`, else config.json's `pad_token_id`, else 0); padded tokens are masked, so a
 * text's outputs do not depend on it. Truncation: a text longer than maxLength (the model's
 * positions, or the tokenizer's own `truncation.max_length` when smaller) keeps its first
 * tokens and the special tokens around them, as `truncation=True` does for one text.
 *
 * A text's real tokens (`lengths` of encodeBatch, from which every mask of the data pipeline and
 * the explorer is built) end at its last token whose id is not the model's pad id (config.json's
 * `pad_token_id`; at least the first token is kept): tokens with that id at the end of a text
 * are padding. This is where transformers' GPT2ForSequenceClassification pools: the rightmost
 * token whose id is not `pad_token_id` (`(arange(n) * (input_ids != pad_token_id)).argmax(-1)`,
 * 0 when every token is the pad id), so "free money<|endoftext|>" gives the logits of "free
 * money" when the pad id is the end-of-text id. Its attention is causal, so the tokens after
 * the pooled one change nothing and masking them is exact; a pad id inside a text stays a real,
 * attended token, as transformers attends to it. BERT's texts end with [SEP], so this never
 * applies to them. Without `pad_token_id` nothing is trimmed (transformers then pools the last
 * token).
 */
export class HfTokenizer implements TextTokenizer {
  readonly maxLength: number;
  readonly size: number;
  /** The id written after a text's tokens. */
  readonly padId: number;
  /** The model's pad id, config.json's `pad_token_id` (null when it has none): see the class comment. */
  readonly modelPadId: number | null;
  readonly #tokenizer: Tokenizer;
  readonly #json: Record<string, unknown>;
  #config: Record<string, unknown> = {};
  readonly #prefix: number[];
  readonly #suffix: number[];

  private constructor(tokenizer: Tokenizer, json: Record<string, unknown>, maxLength: number, padId: number, modelPadId: number | null, who: string) {
    this.#tokenizer = tokenizer;
    this.#json = json;
    this.maxLength = maxLength;
    this.padId = padId;
    this.modelPadId = modelPadId;
    this.size = tokenizer.get_vocab(true).size;
    // The special tokens the post-processor puts around one text: compare a probe text with and without them.
    const plain: number[] = tokenizer.encode("a", { add_special_tokens: false }).ids;
    const full: number[] = tokenizer.encode("a").ids;
    const at = full.findIndex((_, i) => plain.every((id, k) => full[i + k] === id));
    if (plain.length === 0 || at < 0) throw new HfImportError(`${who}: tokenizer.json: cannot tell which special tokens it adds around a text`);
    this.#prefix = full.slice(0, at);
    this.#suffix = full.slice(at + plain.length);
    if (this.#prefix.length + this.#suffix.length >= maxLength)
      throw new HfImportError(`${who}: tokenizer.json adds ${this.#prefix.length + this.#suffix.length} special tokens, the model takes at most ${maxLength} tokens`);
  }

  /**
   * A tokenizer from the tokenizer.json document (see loadHfTokenizer in textTokenizer.ts).
   *
   * @param padTokenId config.json's `pad_token_id` (null when none): the model's pad id, and
   *   the padding id when tokenizer.json sets none.
   * @param where the file, first words of error messages.
   * @param config tokenizer_config.json's content ({} when absent).
   * @throws HfImportError when the library cannot build a tokenizer from it.
   * @example HfTokenizer.fromJSON(JSON.parse(text), 512, 0, "train: run/tokenizer.json")
   */
  static fromJSON(json: Record<string, unknown>, maxLength: number, padTokenId: number | null, where: string, config: Record<string, unknown> = {}): HfTokenizer {
    let tokenizer: Tokenizer;
    try {
      tokenizer = new Tokenizer(json, config);
      tokenizer.encode("a");
    } catch (e) {
      throw new HfImportError(`${where}: not a tokenizer @huggingface/tokenizers can read (${(e as Error).message})`);
    }
    const padding = json.padding as { pad_id?: unknown } | null | undefined;
    const padId = typeof padding?.pad_id === "number" ? padding.pad_id : (padTokenId ?? 0);
    const truncation = json.truncation as { max_length?: unknown } | null | undefined;
    const limit = typeof truncation?.max_length === "number" ? Math.min(truncation.max_length, maxLength) : maxLength;
    const built = new HfTokenizer(tokenizer, json, limit, padId, padTokenId, where);
    built.#config = config;
    return built;
  }

  /** The tokenizer_config.json content it was built with ({} when none): with toJSON(), what rebuilds it elsewhere (the explorer page). */
  get tokenizerConfig(): Record<string, unknown> {
    return this.#config;
  }

  /** The tokenizer.json document it was built from (saved with checkpoints and exports). */
  toJSON(): Record<string, unknown> {
    return this.#json;
  }

  /**
   * A text's ids with the special tokens, truncated to maxLength (see the class comment).
   *
   * @example tok.encode("free money") // [2, 45, 61, 62, 3] for the BERT fixture
   */
  encode(text: string): number[] {
    // One pass of the library: the text's tokens, then the special tokens around them (found in the constructor).
    const inner: number[] = this.#tokenizer.encode(text, { add_special_tokens: false }).ids;
    const keep = this.maxLength - this.#prefix.length - this.#suffix.length;
    return [...this.#prefix, ...(inner.length > keep ? inner.slice(0, keep) : inner), ...this.#suffix];
  }

  /** The tokens of a text as the library names them (special tokens included, before truncation). */
  tokens(text: string): string[] {
    return this.#tokenizer.encode(text).tokens;
  }

  /**
   * Texts as a padded matrix [count, length] and each text's real tokens: those up to its last
   * token whose id is not the model's pad id (see the class comment).
   *
   * @example gpt2.encodeBatch(["free money<|endoftext|>"]).lengths // [6]: the 7th token, <|endoftext|>, is padding
   */
  encodeBatch(texts: readonly string[], length = this.maxLength): { ids: Int32Array; lengths: Int32Array } {
    const rows = padRows(texts.map((t) => this.encode(t)), length, this.padId);
    if (this.modelPadId !== null) rows.lengths = readLengths(rows.ids, rows.lengths, length, this.modelPadId);
    return rows;
  }

  decode(ids: ArrayLike<number>): string[] {
    return Array.from(ids, (i) => this.#tokenizer.id_to_token(i) ?? "[UNK]");
  }
}

/**
 * Each row's real tokens once trailing tokens with the model's pad id are dropped: the index
 * after the last token of the row's first `lengths[i]` whose id is not `padId`, at least 1 when
 * the row has a token (transformers pools token 0 of a text made only of pad ids).
 *
 * @param ids [count, length] row-major. @param lengths each row's tokens before trimming.
 * @returns a new Int32Array [count].
 * @example readLengths(Int32Array.from([5, 7, 0, 0]), Int32Array.from([3]), 4, 0) // [2]
 */
export function readLengths(ids: Int32Array, lengths: Int32Array, length: number, padId: number): Int32Array {
  return lengths.map((n, i) => {
    let end = n;
    while (end > 1 && ids[i * length + end - 1] === padId) end--;
    return end;
  });
}
