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
 */
export class HfTokenizer implements TextTokenizer {
  readonly maxLength: number;
  readonly size: number;
  /** The id written after a text's tokens. */
  readonly padId: number;
  readonly #tokenizer: Tokenizer;
  readonly #json: Record<string, unknown>;
  #config: Record<string, unknown> = {};
  readonly #prefix: number[];
  readonly #suffix: number[];

  private constructor(tokenizer: Tokenizer, json: Record<string, unknown>, maxLength: number, padId: number, who: string) {
    this.#tokenizer = tokenizer;
    this.#json = json;
    this.maxLength = maxLength;
    this.padId = padId;
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
    const built = new HfTokenizer(tokenizer, json, limit, padId, where);
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

  encodeBatch(texts: readonly string[], length = this.maxLength): { ids: Int32Array; lengths: Int32Array } {
    return padRows(texts.map((t) => this.encode(t)), length, this.padId);
  }

  decode(ids: ArrayLike<number>): string[] {
    return Array.from(ids, (i) => this.#tokenizer.id_to_token(i) ?? "[UNK]");
  }
}
