import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  csvColumns,
  decodeBytes,
  decodeEmail,
  emailText,
  labelIds,
  loadSpamCorpus,
  loadTextDataset,
  readCsvTexts,
  readJsonlTexts,
  stratifiedSplit,
  CLS_ID,
  PAD_ID,
  UNK_ID,
  WordTokenizer,
} from "../../src/data/text/index.ts";
import { InputError } from "../../src/util/errors.ts";

const dir = mkdtempSync(join(tmpdir(), "attnlip-text-"));
function file(name: string, content: string | Uint8Array): string {
  const path = join(dir, name);
  writeFileSync(path, content);
  return path;
}

test("a CSV with a UTF-8 BOM and CRLF line ends has the columns [text, label]", () => {
  const path = file("bom.csv", '\uFEFFtext,label\r\nhello world,ham\r\n"buy, now",spam\r\n');
  assert.deepEqual(csvColumns(path), ["text", "label"]);
  const r = readCsvTexts(path);
  assert.deepEqual(r.texts, ["hello world", "buy, now"]);
  assert.deepEqual(r.labels, ["ham", "spam"]);
});

test("JSONL: blank lines (also at the end) are skipped; a malformed line is an error naming its line", () => {
  const good = file("ok.jsonl", '{"text":"a","label":"x"}\n\n{"text":"b","label":1}\n   \n\n');
  const r = readJsonlTexts(good);
  assert.deepEqual(r.texts, ["a", "b"]);
  assert.deepEqual(r.labels, ["x", "1"]);
  assert.deepEqual(r.lines, [1, 3]);
  const bad = file("bad.jsonl", '{"text":"a","label":"x"}\n\n{"text": "b", label}\n');
  assert.throws(
    () => readJsonlTexts(bad),
    (e: Error) => e instanceof InputError && /bad\.jsonl: line 3: not valid JSON/.test(e.message),
  );
  const noKey = file("nokey.jsonl", '{"text":"a"}\n');
  assert.throws(() => readJsonlTexts(noKey), /line 1: no key "label"/);
});

test("a missing column or an unknown label is an InputError naming the file and the column / label", () => {
  const path = file("cols.csv", "body,label\nhi,ham\n");
  assert.throws(
    () => readCsvTexts(path),
    (e: Error) =>
      e instanceof InputError &&
      e.message.includes("cols.csv") &&
      e.message.includes('no column "text"'),
  );
  const labelled = file("labels.csv", "text,label\nhi,ham\nyo,eggs\n");
  const records = readCsvTexts(labelled);
  assert.throws(
    () => labelIds(records, labelled, ["ham", "spam"]),
    (e: Error) =>
      e instanceof InputError &&
      e.message.includes("labels.csv") &&
      e.message.includes('unknown label "eggs"'),
  );
  // Without given names, labels map to ids in sorted order (numbers numerically).
  assert.deepEqual(labelIds(records, labelled).names, ["eggs", "ham"]);
  assert.deepEqual(
    Array.from(
      labelIds({ texts: ["", "", ""], labels: ["10", "9", "10"], lines: [2, 3, 4] }, "f").ids,
    ),
    [1, 0, 1],
  );
});

test("empty and non-UTF-8 messages load without errors", async () => {
  const latin = Uint8Array.from([
    ...Buffer.from("text,label\n"),
    0x63,
    0x61,
    0x66,
    0xe9,
    0x2c,
    0x68,
    0x61,
    0x6d,
    0x0a,
    0x2c,
    0x73,
    0x70,
    0x61,
    0x6d,
    0x0a,
  ]);
  const r = readCsvTexts(file("latin1.csv", latin));
  assert.deepEqual(r.texts, ["café", ""]);
  // FF FE / FE FF are UTF-16 byte-order marks; the same bytes elsewhere are Windows-1252.
  assert.equal(decodeBytes(Uint8Array.from([0xff, 0xfe, 0x41, 0x00])), "A");
  assert.equal(decodeBytes(Uint8Array.from([0xfe, 0xff, 0x00, 0x41])), "A");
  assert.equal(decodeBytes(Uint8Array.from([0x41, 0xff, 0xfe])), "Aÿþ");
  assert.equal(await emailText(""), "");
  const m = await decodeEmail(
    "Subject: =?iso-8859-1?Q?caf=E9?=\nContent-Type: text/plain; charset=iso-8859-1\nContent-Transfer-Encoding: quoted-printable\n\nna=EFve =\nline\n",
  );
  assert.equal(m.subject, "café");
  assert.equal(m.body.trim(), "naïve line");
  const html = await emailText(
    'Subject: hi\nContent-Type: multipart/alternative; boundary="b"\n\n--b\nContent-Type: text/html\nContent-Transfer-Encoding: base64\n\n' +
      Buffer.from("<p>Win <b>cash</b>&amp;more</p>").toString("base64") +
      "\n--b\nContent-Type: image/png\n\nxxxx\n--b--\n",
  );
  // Inline markup joins as a browser shows it ("cash&more"); the PNG part is dropped.
  assert.equal(html, "hi Win cash&more");
  const tok = WordTokenizer.train(["a b"], { vocabSize: 10, maxLength: 4, minCount: 1 });
  assert.deepEqual(Array.from(tok.encode("")), [CLS_ID]);
});

test("tokenizer: [PAD] 0, [UNK], [CLS]; vocabulary from training texts only, <= vocabSize; truncation; JSON round trip", () => {
  const tok = WordTokenizer.train(["the cat sat", "the cat ran", "the dog"], {
    vocabSize: 5,
    maxLength: 4,
    minCount: 1,
  });
  assert.equal(PAD_ID, 0);
  assert.deepEqual(tok.vocab.slice(0, 3), ["[PAD]", "[UNK]", "[CLS]"]);
  assert.deepEqual(tok.vocab.slice(3), ["the", "cat"]);
  assert.deepEqual(Array.from(tok.encode("The CAT sat on the mat")), [CLS_ID, 3, 4, UNK_ID]);
  const again = WordTokenizer.fromJSON(JSON.parse(JSON.stringify(tok.toJSON())));
  assert.deepEqual(again.vocab, tok.vocab);
  assert.throws(() => WordTokenizer.fromJSON({ format: "nope" }), InputError);
  // Very long text: truncated to maxLength, read only as far as needed.
  const long = "word ".repeat(1_000_000);
  assert.equal(tok.encode(long).length, 4);
});

test("the CSV data set: stratified seeded split, tokenizer from the training split only", async () => {
  const rows = ["text,label"];
  for (let i = 0; i < 40; i++)
    rows.push(
      `${i % 4 === 0 ? "spam offer" : "meeting notes"} w${i},${i % 4 === 0 ? "spam" : "ham"}`,
    );
  const path = file("split.csv", rows.join("\r\n"));
  const d = await loadTextDataset(`csv:${path}`, { seed: 3, maxLength: 8, vocabSize: 100 });
  assert.equal(d.train.count, 32);
  assert.equal(d.test.count, 8);
  assert.deepEqual(d.labelNames, ["ham", "spam"]);
  assert.equal(d.test.labels.filter((l) => l === 1).length, 2, "stratified: 20% of the 10 spam");
  // Words of test rows only (w<i> is unique per row) are unknown: minCount 2 drops them anyway,
  // so check the vocabulary holds no test-only word with minCount 1 as well.
  const d1 = await loadTextDataset(`csv:${path}`, {
    seed: 3,
    maxLength: 8,
    vocabSize: 100,
    tokenizer: undefined,
  });
  assert.ok(d1.tokenizer.size <= 100);
  const split = stratifiedSplit(
    Int32Array.from({ length: 40 }, (_, i) => (i % 4 === 0 ? 1 : 0)),
    0.2,
    3,
  );
  assert.deepEqual(
    [...split.train, ...split.test].sort((a, b) => a - b),
    Array.from({ length: 40 }, (_, i) => i),
  );
  const tokMin1 = WordTokenizer.train(
    Array.from(split.train, (i) => rows[i + 1].split(",")[0]),
    { vocabSize: 100, maxLength: 8, minCount: 1 },
  );
  for (const i of split.test) assert.equal(tokMin1.id(`w${i}`), UNK_ID);
});

test("SpamAssassin: 6046 messages (1896 spam), 80/20 stratified split, vocabulary <= 8000", async () => {
  const corpus = await loadSpamCorpus();
  assert.equal(corpus.texts.length, 6046);
  assert.equal(
    corpus.labels.reduce((a, b) => a + b, 0),
    1896,
  );
  const d = await loadTextDataset("spam", { seed: 0 });
  assert.equal(d.train.count + d.test.count, 6046);
  assert.equal(d.test.count, 1209);
  const spamTest = d.test.labels.reduce((a, b) => a + b, 0);
  assert.equal(spamTest, Math.round(1896 * 0.2));
  assert.ok(d.tokenizer.size <= 8000);
  assert.equal(d.train.length, 128);
  for (let i = 0; i < d.test.count; i++) assert.equal(d.test.ids[i * 128], CLS_ID);
});

test("a CSV with a UTF-8 BOM and a stray non-UTF-8 byte keeps its header; one class is a clear error", async () => {
  const { decodeBytes } = await import("../../src/data/text/charset.ts");
  const bytes = Uint8Array.from([0xef, 0xbb, 0xbf, ...Buffer.from("text,label\r\ncaf\u00e9 "), 0xff, ...Buffer.from(",ham\r\n")]);
  const text = decodeBytes(bytes);
  assert.ok(text.startsWith("text,label"), JSON.stringify(text.slice(0, 12)));
  assert.ok(text.includes("caf\u00e9"), "valid UTF-8 elsewhere survives");
  const { labelIds } = await import("../../src/data/text/files.ts");
  assert.throws(
    () => labelIds({ texts: ["a", "b"], labels: ["ham", "ham"], lines: [2, 3] } as never, "one.csv"),
    /one\.csv: the label column has only one class \("ham"\)/,
  );
});

test("the decoded corpus keeps no HTML character reference and no C1 control character", async () => {
  const { decodeHTMLStrict } = await import("entities");
  const { texts, names, skipped } = await loadSpamCorpus();
  assert.deepEqual(skipped, [], "every message of the package decodes");
  assert.equal(names.length, texts.length);
  // A reference is what an HTML decoder would turn into something else ("&EO;" in spam is not one).
  const REF = /&(?:#[0-9]+|#x[0-9a-f]+|[a-z][a-z0-9]*);/gi;
  const withRefs: string[] = [];
  const withC1: string[] = [];
  texts.forEach((t, i) => {
    const ref = [...t.matchAll(REF)].find((m) => decodeHTMLStrict(m[0]) !== m[0]);
    if (ref !== undefined) withRefs.push(`${names[i]}: ${ref[0]}`);
    if (/[\u0080-\u009f]/.test(t)) withC1.push(names[i]);
  });
  assert.deepEqual(withRefs, []);
  assert.deepEqual(withC1, []);
});
