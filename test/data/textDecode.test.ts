// E-mail decoding (src/data/text/decode.ts, charset.ts): one small message per fault the
// hand-written decoder had, with the right text as the expected value, and one test per
// library boundary (what happens when a library cannot read its input).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  decodeBytes,
  decodeCorpus,
  decodeEmail,
  EmailDecodeError,
  emailText,
  htmlToText,
  resolveCharset,
} from "../../src/data/text/index.ts";
import { InputError } from "../../src/util/errors.ts";
import { sha256Parts } from "../helpers/sha256Parts.ts";

const FIXTURES = join(import.meta.dirname, "..", "fixtures", "text");
/** A fixture message as bytes. */
const eml = (name: string): Buffer => readFileSync(join(FIXTURES, `${name}.eml`));
/** A fixture message as a string (an ASCII file reads the same as bytes). */
const emlText = (name: string): string => eml(name).toString("utf8");

test("HTML character references are decoded: &#x27; &amp; &reg; &nbsp; &#8364; &#36; &#x2014; &lt;", async () => {
  const m = await decodeEmail(eml("html-entities"));
  const [plain, html] = m.body.split("\n", 2);
  assert.equal(plain, "Fish & chips", "a reference in a text/plain part");
  assert.equal(html, "It's ® Acme\u00a0Co & sons: €5 $6 — <now>");
  assert.equal(
    await emailText(emlText("html-entities")),
    "Offer Shop <shop@example.com> Fish & chips It's ® Acme Co & sons: €5 $6 — <now> Click here",
    "markup, link targets and images dropped; no-break spaces collapsed",
  );
  assert.equal(
    htmlToText("Saint Kitts &amp;amp; Nevis"),
    "Saint Kitts &amp; Nevis",
    "html-to-text decodes once",
  );
  assert.equal(
    await emailText("Subject: x\nContent-Type: text/html\n\n<p>Saint Kitts &amp;amp; Nevis</p>"),
    "x Saint Kitts & Nevis",
    "a double-escaped reference is decoded again",
  );
});

test("Windows-1252 text keeps its curly quotes, dashes and euro sign (not C1 controls)", async () => {
  const qp = await decodeEmail(eml("windows-1252-qp"));
  assert.equal(qp.body, "“Smart” quotes – dashes — and € 5 …\nLabelled Latin-1: ‘café’");
  const bytes = await decodeEmail(eml("windows-1252-8bit"));
  assert.equal(bytes.body.trim(), "“Smart” € 5 – café", "8-bit bytes of a message given as bytes");
  assert.equal(
    resolveCharset("iso-8859-1")?.name,
    "windows-1252",
    "WHATWG: Latin-1 labels are Windows-1252",
  );
  assert.equal(resolveCharset("us-ascii")?.name, "windows-1252");
  assert.equal(decodeBytes(Uint8Array.of(0x93, 0x80, 0x94)), "“€”", "not UTF-8: Windows-1252");
  assert.doesNotMatch(qp.body + bytes.body, /[\u0080-\u009f]/);
});

test("RFC 2047: a UTF-8 character split across two encoded words is joined, not mojibake", async () => {
  const m = await decodeEmail(eml("encoded-word-split"));
  assert.equal(m.subject, "café € the 😀 ok", "B words splitting é and 😀");
  assert.equal(m.from, "Renée <renee@example.com>", "Q words splitting é");
});

test("quoted-printable soft line breaks with spaces or tabs after the = are removed", async () => {
  const m = await decodeEmail(eml("qp-soft-break-whitespace"));
  assert.equal(m.body, "This line is broken in the middle, and so is this one; café \nend\n");
});

test("a boundary string in the middle of a line does not end the part", async () => {
  const m = await decodeEmail(eml("boundary-mid-line"));
  assert.equal(
    m.body,
    "first line\nthe string --XYZ inside a line does not end the part\nlast line\nsecond part",
  );
});

test("a nested boundary that extends the outer one (outer--alt) keeps every part and no stray --", async () => {
  const m = await decodeEmail(eml("nested-boundary"));
  assert.equal(m.body, "inner text\ninner html\nsecond part");
});

test("UTF-7 parts are decoded", async () => {
  const m = await decodeEmail(eml("utf-7"));
  assert.equal(m.body, "Hi Mom -☺-! A≢Α. 1 £1.\n");
});

test("a message given as a string is text already: 8-bit characters stay, encoded parts use their charset", async () => {
  const m = await decodeEmail(
    "Subject: Grüße\nContent-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/plain; charset=iso-8859-1\n\nnaïve é\n--b\nContent-Type: text/plain; charset=iso-8859-1\nContent-Transfer-Encoding: quoted-printable\n\nna=EFve\n--b--\n",
  );
  assert.equal(m.subject, "Grüße");
  assert.equal(m.body, "naïve é\nnaïve", "not 'naÃ¯ve' (its UTF-8 read as Latin-1)");
  assert.equal(
    (await decodeEmail("no header block here\njust text")).body,
    "no header block here\njust text",
  );
  assert.equal(
    await emailText("From mbox@line Thu Aug 22 2002\nSubject: s\n\nb"),
    "s b",
    "mbox From line",
  );
});

// Issue: emailText("just text &amp; no headers") returned the text unchanged while the same
// body after headers became "&". A message without headers is now read as an untyped body.
test("a message without headers is read as a body after headers is: references decoded, HTML reduced", async () => {
  assert.equal(await emailText("just text &amp; no headers"), "just text & no headers");
  assert.equal(
    await emailText("just text &amp; no headers"),
    await emailText("Subject: \n\njust text &amp; no headers"),
  );
  assert.equal(await emailText(Buffer.from("caf&eacute; &#8364;5 &lt;b&gt;")), "café €5 <b>");
  assert.equal(await emailText("<html><p>Win&nbsp;&#36;5</p></html>"), "Win $5");
  assert.equal(
    (await decodeEmail("no header block here\njust text &amp;amp; more")).body,
    "no header block here\njust text &amp; more",
    "decoded once, as after headers",
  );
});

// An embedded message marked as an attachment is dropped like any attachment
// (textAttachments.test.ts).
test("embedded messages (forwarded inline) give their subject, sender and text", async () => {
  const raw =
    'Subject: fwd\nContent-Type: multipart/mixed; boundary="b"\n\n--b\nContent-Type: text/plain\n\nsee below\n' +
    "--b\nContent-Type: message/rfc822\n\nSubject: inner\nFrom: x@y.z\n\ninner body\n--b--\n";
  assert.equal((await decodeEmail(raw)).body, "see below\ninner\nx@y.z\ninner body");
});

test("charset library boundary: unknown or WHATWG-only labels never fail the message", async () => {
  assert.equal(resolveCharset("x-no-such-charset"), null);
  assert.equal(resolveCharset("iso-2022-kr"), null, "a 'replacement' label is no decoder");
  assert.equal(
    resolveCharset("iso-2022-jp")?.decode(Buffer.from("1b2442246b1b2842", "hex")),
    "る",
    "TextDecoder fallback",
  );
  const unknown = await decodeEmail(
    "Subject: u\nContent-Type: multipart/mixed; boundary=b\n\n" +
      "--b\nContent-Type: text/plain; charset=x-no-such-charset\nContent-Transfer-Encoding: quoted-printable\n\n=E2=82=AC 5\n" +
      "--b\nContent-Type: text/plain; charset=x-no-such-charset\nContent-Transfer-Encoding: quoted-printable\n\ncaf=E9\n--b--\n",
  );
  assert.equal(unknown.body, "€ 5\ncafé", "unknown label: UTF-8 when valid, else Windows-1252");
});

test("MIME parser boundary: a message it cannot read is an EmailDecodeError naming the message", async () => {
  const parts = Array.from(
    { length: 1001 },
    (_, i) => `--b\nContent-Type: text/plain\n\np${i}\n`,
  ).join("");
  const raw = `Subject: many\nContent-Type: multipart/mixed; boundary="b"\n\n${parts}--b--\n`;
  await assert.rejects(
    decodeEmail(raw, { name: "spam-9/00001" }),
    (e: Error) =>
      e instanceof EmailDecodeError &&
      e instanceof InputError &&
      e.message ===
        "spam-9/00001: the MIME parser cannot read the message (Max allowed child nodes exceeded)",
  );
});

test("HTML converter boundary: HTML it cannot convert is an EmailDecodeError naming the message and part", async () => {
  const deep = "<div>".repeat(20000) + "x" + "</div>".repeat(20000);
  const raw = `Subject: deep\nContent-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/plain\n\nok\n--b\nContent-Type: text/html\n\n${deep}\n--b--\n`;
  await assert.rejects(
    decodeEmail(raw, { name: "deep.eml" }),
    (e: Error) =>
      e instanceof EmailDecodeError &&
      /^deep\.eml: part 2 \(text\/html\): cannot convert the HTML to text \(/.test(e.message),
  );
});

test("the corpus loader skips messages it cannot decode and says how many and why", async () => {
  const parts = Array.from({ length: 1001 }, (_, i) => `--b\n\np${i}\n`).join("");
  const lines: string[] = [];
  const corpus = await decodeCorpus(
    [
      { name: "ham/1", text: "Subject: hello\n\nsee you", label: 0 },
      {
        name: "spam/2",
        text: `Subject: x\nContent-Type: multipart/mixed; boundary=b\n\n${parts}--b--\n`,
        label: 1,
      },
      {
        name: "spam/3",
        text: "Subject: win\nContent-Type: text/html\n\n<p>cash&nbsp;now</p>",
        label: 1,
      },
    ],
    (line) => lines.push(line),
  );
  assert.deepEqual(corpus.texts, ["hello see you", "win cash now"]);
  assert.deepEqual(Array.from(corpus.labels), [0, 1]);
  assert.deepEqual(corpus.names, ["ham/1", "spam/3"]);
  assert.deepEqual(corpus.skipped, [
    {
      name: "spam/2",
      reason: "spam/2: the MIME parser cannot read the message (Max allowed child nodes exceeded)",
    },
  ]);
  assert.deepEqual(lines, [
    "e-mail corpus: skipped 1 of 3 messages that cannot be decoded: spam/2: the MIME parser cannot read the message (Max allowed child nodes exceeded)",
  ]);
  const quiet: string[] = [];
  await decodeCorpus([{ name: "a", text: "Subject: a\n\nb", label: 0 }], (line) =>
    quiet.push(line),
  );
  assert.deepEqual(quiet, [], "nothing to say when nothing is skipped");
  // What was read, skipped messages included, is the corpus's content digest: name, label, text.
  const read = [
    { name: "a", text: "Subject: a\n\nb", label: 0 },
    { name: "b", text: "Subject: c\n\nd", label: 1 },
  ];
  assert.equal(
    (await decodeCorpus(read)).contentDigest,
    sha256Parts(["a", "0", "Subject: a\n\nb", "b", "1", "Subject: c\n\nd"]),
  );
  assert.equal(
    corpus.contentDigest,
    sha256Parts([
      "ham/1",
      "0",
      "Subject: hello\n\nsee you",
      "spam/2",
      "1",
      `Subject: x\nContent-Type: multipart/mixed; boundary=b\n\n${parts}--b--\n`,
      "spam/3",
      "1",
      "Subject: win\nContent-Type: text/html\n\n<p>cash&nbsp;now</p>",
    ]),
  );
});
