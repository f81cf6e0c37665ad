/** Text data: the SpamAssassin corpus, CSV / JSONL files, robust decoding and the word tokenizer. */
export * from "./charset.ts";
export * from "./decode.ts";
export * from "./files.ts";
export * from "./tokenizer.ts";
export * from "./dataset.ts";
export * from "./spamCorpus.ts";
