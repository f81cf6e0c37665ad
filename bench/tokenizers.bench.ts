import { WordTokenizer } from "../src/data/text/tokenizer.ts";
import { loadSpamCorpus } from "../src/data/text/spamCorpus.ts";
import { loadHfTokenizer } from "../src/hf/textTokenizer.ts";
import { renderTable } from "../src/util/table.ts";
import { timeMs } from "./timing.ts";

const FIXTURES = new URL("../test/fixtures/hf/", import.meta.url).pathname;

/**
 * Tokenizing text for an imported model: the SpamAssassin test messages an `analyze` of an
 * imported BERT or GPT-2 on `--data spam` reads, encoded by the fixtures' tokenizer.json files
 * (@huggingface/tokenizers: WordPiece, byte-level BPE; truncated to 64 positions) against
 * attnlip's own word tokenizer (length 128) on the same texts, the reference.
 */
export async function benchTokenizers(): Promise<Record<string, unknown>> {
  const corpus = await loadSpamCorpus();
  const texts = corpus.texts.slice(0, 1209);
  const word = WordTokenizer.train(texts, { vocabSize: 8000, maxLength: 128 });
  const bert = (await loadHfTokenizer(`${FIXTURES}bert-tiny-random`, 64, 0, "bench"))!;
  const gpt2 = (await loadHfTokenizer(`${FIXTURES}gpt2-tiny-random`, 64, 0, "bench"))!;
  const ms = {
    word: timeMs(() => word.encodeBatch(texts), { warmup: 0, repeats: 1 }),
    wordPiece: timeMs(() => bert.encodeBatch(texts), { warmup: 0, repeats: 1 }),
    byteLevelBpe: timeMs(() => gpt2.encodeBatch(texts), { warmup: 0, repeats: 1 }),
  };
  console.log(`${texts.length} SpamAssassin messages (the size of its test split), encoded once each`);
  console.log(
    renderTable(
      ["tokenizer", "ms", "ratio to the word tokenizer"],
      [
        ["attnlip word tokenizer, length 128 (reference)", ms.word.toFixed(0), "1"],
        ["BERT fixture tokenizer.json (WordPiece), length 64", ms.wordPiece.toFixed(0), (ms.wordPiece / ms.word).toFixed(1)],
        ["GPT-2 fixture tokenizer.json (byte-level BPE), length 64", ms.byteLevelBpe.toFixed(0), (ms.byteLevelBpe / ms.word).toFixed(1)],
      ],
    ),
  );
  return { texts: texts.length, ms };
}
