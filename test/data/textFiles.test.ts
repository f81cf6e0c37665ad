// User text files (src/data/text/files.ts): encodings through iconv-lite, the physical line
// where a record starts in every CSV / JSONL error, and cuts on whole code points.
import { test } from "node:test";
import assert from "node:assert/strict";
import { copyFileSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  checkEncoding,
  labelIds,
  loadTextDataset,
  readCsvTexts,
  readJsonlTexts,
  wordTokens,
} from "../../src/data/text/index.ts";
import { preview, sliceCodePoints } from "../../src/data/text/truncate.ts";
import type { WordTokenizer } from "../../src/data/text/tokenizer.ts";
import { InputError } from "../../src/util/errors.ts";

const FIXTURES = join(import.meta.dirname, "..", "fixtures", "text");
const dir = mkdtempSync(join(tmpdir(), "attnlip-textfiles-"));
function file(name: string, content: string | Uint8Array): string {
  const path = join(dir, name);
  writeFileSync(path, content);
  return path;
}
/** A lone surrogate half anywhere in `s`. */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

test("a Windows-1252 CSV: auto falls back to Windows-1252; --encoding windows-1252 / latin1 read it too", () => {
  const path = join(FIXTURES, "windows-1252.csv");
  const want = ["“Win” €100 now", "café at noon"];
  assert.deepEqual(readCsvTexts(path).texts, want, "auto: not UTF-8, so Windows-1252");
  assert.deepEqual(readCsvTexts(path, { encoding: "windows-1252" }).texts, want);
  assert.deepEqual(
    readCsvTexts(path, { encoding: "Latin1" }).texts,
    want,
    "Latin-1 labels are Windows-1252",
  );
  assert.throws(
    () => readCsvTexts(path, { encoding: "utf-8" }),
    (e: Error) =>
      e instanceof InputError &&
      e.message.startsWith(
        `${path}: line 2: not valid UTF-8 (--encoding utf-8); give the file's encoding`,
      ),
  );
});

test("JSONL in other encodings: Windows-1252 by auto, UTF-16LE and ISO-8859-15 when asked", () => {
  const lines = '{"text":"“quoted” – €5","label":"spam"}\n{"text":"Grüße","label":"ham"}\n';
  const cp1252 = file(
    "cp1252.jsonl",
    Buffer.from(
      lines.replace(/[“”–€]/g, (c) => ({ "“": "\x93", "”": "\x94", "–": "\x96", "€": "\x80" })[c]!),
      "latin1",
    ),
  );
  assert.deepEqual(readJsonlTexts(cp1252).texts, ["“quoted” – €5", "Grüße"]);
  const utf16 = file(
    "utf16.jsonl",
    Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(lines, "utf16le")]),
  );
  assert.deepEqual(
    readJsonlTexts(utf16, { encoding: "utf-16le" }).texts,
    ["“quoted” – €5", "Grüße"],
    "BOM dropped",
  );
  const latin9 = file(
    "latin9.jsonl",
    Buffer.from('{"text":"\xa4 5","label":1}\n{"text":"x","label":2}\n', "latin1"),
  );
  assert.deepEqual(
    readJsonlTexts(latin9, { encoding: "iso-8859-15" }).texts,
    ["€ 5", "x"],
    "0xA4 is the euro sign in Latin-9",
  );
  assert.throws(
    () => readJsonlTexts(latin9, { encoding: "klingon" }),
    (e: Error) =>
      e instanceof InputError &&
      /^encoding: unknown encoding "klingon": expected auto/.test(e.message),
  );
  assert.equal(checkEncoding(" UTF-8 "), "utf-8");
  assert.throws(() => checkEncoding("klingon"), RangeError);
});

test("loadTextDataset records the encoding it read a file with (null for the corpus spec)", async () => {
  const rows = ["text,label"];
  for (let i = 0; i < 10; i++) rows.push(`caf\xe9 ${i},${i % 2 === 0 ? "ham" : "spam"}`);
  const path = file("latin.csv", Buffer.from(rows.join("\n"), "latin1"));
  const auto = await loadTextDataset(`csv:${path}`, { maxLength: 8, vocabSize: 50 });
  assert.equal(auto.encoding, "auto");
  const given = await loadTextDataset(`csv:${path}`, {
    maxLength: 8,
    vocabSize: 50,
    encoding: " Windows-1252 ",
  });
  assert.equal(given.encoding, "windows-1252");
  assert.ok((given.tokenizer as WordTokenizer).vocab.includes("café"));
  await assert.rejects(
    loadTextDataset(`csv:${path}`, { encoding: "utf-8" }),
    /latin\.csv: line 2: not valid UTF-8/,
  );
});

test("CSV errors name the physical line where the record starts, with quoted fields over several lines", () => {
  const path = join(FIXTURES, "multiline.csv");
  const records = readCsvTexts(path);
  assert.deepEqual(records.texts, [
    "first\nrecord",
    "second record\nspans\nthree lines",
    "plain",
    "bad\nlabel",
  ]);
  assert.deepEqual(records.lines, [2, 4, 7, 8]);
  assert.throws(
    () => labelIds(records, path, ["ham", "spam"]),
    (e: Error) =>
      e instanceof InputError && e.message.startsWith(`${path}: line 8: unknown label "eggs"`),
  );
  // CRLF inside a quoted field is one line break (csv-parse's own count makes it two), and
  // skipped empty lines still count.
  const crlf = file(
    "crlf.csv",
    'text,label\r\n"a\r\nb",ham\r\n\r\n\r\nplain,spam\r\n"x\r\n\r\ny",\r\n',
  );
  assert.throws(
    () => readCsvTexts(crlf),
    (e: Error) =>
      e instanceof InputError &&
      e.message === `${crlf}: line 7: record 3 has an empty label in column "label"`,
  );
  const short = file("short.csv", 'label,text\nham,"one\ntwo"\nspam\n');
  assert.throws(
    () => readCsvTexts(short),
    (e: Error) => e.message === `${short}: line 4: record 2 has 1 field, column "text" is missing`,
  );
  const open = file("open.csv", 'text,label\nok,ham\n\n"never\nclosed,spam\n');
  assert.throws(
    () => readCsvTexts(open),
    (e: Error) =>
      e instanceof InputError &&
      e.message.startsWith(`${open}: line 4: not valid CSV (Quote Not Closed`) &&
      !/at line \d/.test(e.message),
  );
  // A BOM and LF line ends: lines unchanged.
  assert.deepEqual(
    readCsvTexts(file("bom.csv", "\ufefftext,label\nhi,ham\n\nyo,spam\n")).lines,
    [2, 4],
  );
});

test("JSONL errors name their line (blank lines counted)", () => {
  const path = file("bad.jsonl", '{"text":"a","label":"x"}\n\n\n{"text":"b","label":[]}\n');
  assert.throws(
    () => readJsonlTexts(path),
    (e: Error) => e.message.startsWith(`${path}: line 4: "label" must be`),
  );
});

test("a JSONL record or a CSV header that names a key twice is refused, naming the line and the key", () => {
  const jsonl = file(
    "dup.jsonl",
    '{"text":"a","label":"x"}\n{"text":"b","label":"ham","label":"spam"}\n',
  );
  assert.throws(
    () => readJsonlTexts(jsonl),
    (e: Error) =>
      e instanceof InputError &&
      e.message ===
        `${jsonl}: line 2: the key "label" appears twice in one object (columns 13 and 27); a JSON object must not repeat a key`,
  );
  const csv = file("dup.csv", "text,label,text\nhello,ham,again\n");
  assert.throws(
    () => readCsvTexts(csv),
    (e: Error) =>
      e instanceof InputError &&
      e.message ===
        `${csv}: line 1: the header names column "text" twice (columns 1 and 3); rename one (--text-column)`,
  );
});

test("token and text cuts keep whole code points (an emoji at the cut is not split in half)", () => {
  assert.equal(sliceCodePoints("ab😀c", 3), "ab");
  assert.equal(sliceCodePoints("ab😀c", 4), "ab😀");
  assert.equal(sliceCodePoints("ab", 5), "ab");
  assert.equal(sliceCodePoints("😀", 0), "");
  assert.throws(() => sliceCodePoints("x", -1), RangeError);
  // The text cut before tokenizing (40 code units per token asked for): the emoji straddles unit 80.
  const text = " ".repeat(78) + "b😀 tail";
  assert.equal(text.charCodeAt(79), 0xd83d, "the cut falls inside the emoji");
  assert.deepEqual(
    wordTokens(text, 2),
    ["b"],
    "the emoji is dropped whole (was: a lone \\ud83d token)",
  );
  assert.deepEqual(wordTokens(" ".repeat(77) + "b😀 tail", 2), ["b", "😀"], "or kept whole");
  assert.deepEqual(
    wordTokens(" ".repeat(79) + "😀 tail", 2),
    [],
    "cut before the emoji: no lone half",
  );
  // The 32-unit cut of a long word: an astral letter (Gothic 𐌰, kept by NFKC) at units 31-32.
  const word = "a".repeat(31) + "𐌰" + "b";
  const [token] = wordTokens(word);
  assert.equal(token, "a".repeat(31));
  assert.doesNotMatch(token, LONE_SURROGATE);
  // Error-message previews of long labels.
  const long = preview("x".repeat(77) + "😀😀", 80);
  assert.equal(long, `"${"x".repeat(77)}…`);
  assert.doesNotMatch(long, LONE_SURROGATE);
  const labels = { texts: ["", ""], labels: ["ham", "y".repeat(200) + "😀"], lines: [2, 3] };
  assert.throws(
    () => labelIds(labels, "f.csv", ["ham", "spam"]),
    (e: Error) =>
      e.message ===
      `f.csv: line 3: unknown label "${"y".repeat(78)}… (the classes are "ham", "spam")`,
  );
});

test("fixtures are byte-exact (no editor or git line-end conversion)", () => {
  const copy = join(dir, "copy.csv");
  copyFileSync(join(FIXTURES, "windows-1252.csv"), copy);
  const bytes = readFileSync(copy);
  assert.equal(bytes[12], 0x93, "Windows-1252 left double quotation mark");
  assert.equal(bytes.indexOf("\r\n"), 10, "CRLF line ends");
});

test("a text column that is also the label column is refused (the model would read its own label)", () => {
  const csv = file("same.csv", "text,label\nhello,ham\nbye,spam\n");
  return assert.rejects(loadTextDataset(`csv:${csv}`, { textColumn: "label", labelColumn: "label" }), {
    name: "InputError",
    message: `${csv}: --text-column and --label-column both name "label"; the model would read its own label`,
  });
});
