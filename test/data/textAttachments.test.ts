// Attachments are not a message's text (issue 38, case 4; Haraka #41, django-mailbox #169,
// enmime #129): a text/plain or text/csv file sent with a message used to be read as its body.
import { test } from "node:test";
import assert from "node:assert/strict";
import { decodeEmail, emailText } from "../../src/data/text/index.ts";

const CSV = "id,amount\n1,100\n2,200\n";

/** A multipart/mixed message with the given parts (each "headers\n\nbody"). */
function mixed(...parts: string[]): string {
  return (
    'Subject: report\nFrom: a@example.com\nContent-Type: multipart/mixed; boundary="m"\n\n' +
    parts.map((p) => `--m\n${p}\n`).join("") +
    "--m--\n"
  );
}

test("text/plain and text/csv parts marked Content-Disposition: attachment are not the body", async () => {
  const raw = mixed(
    "Content-Type: text/plain; charset=utf-8\n\nSee the numbers attached.",
    `Content-Type: text/plain; name=test.csv\nContent-Disposition: attachment; filename=test.csv\n\n${CSV}`,
    `Content-Type: text/csv\nContent-Disposition: attachment\n\n${CSV}`,
    `Content-Type: text/csv; name="b.csv"\nContent-Disposition: ATTACHMENT\nContent-Transfer-Encoding: base64\n\n${Buffer.from(CSV).toString("base64")}`,
  );
  const m = await decodeEmail(raw);
  assert.equal(m.body, "See the numbers attached.");
  assert.equal(await emailText(raw), "report a@example.com See the numbers attached.");
});

test("a text part with a file name and no Content-Disposition (name= only) is an attachment", async () => {
  const raw = mixed(
    "Content-Type: text/plain\n\nbody text",
    `Content-Type: text/plain; name="test.csv"\n\n${CSV}`,
    `Content-Type: text/plain; name*=utf-8''r%C3%A9sum%C3%A9.txt\n\nfile text`,
  );
  assert.equal((await decodeEmail(raw)).body, "body text");
});

test("inline text parts are the message's text, with or without a file name", async () => {
  const raw = mixed(
    "Content-Type: text/plain\nContent-Disposition: inline\n\nfirst",
    'Content-Type: text/plain; name="note.txt"\nContent-Disposition: inline; filename="note.txt"\n\nsecond',
    "Content-Type: text/html\nContent-Disposition: Inline\n\n<p>third</p>",
    "Content-Type: text/plain\n\nfourth",
  );
  assert.equal((await decodeEmail(raw)).body, "first\nsecond\nthird\nfourth");
});

test("an unknown disposition type is an attachment (RFC 2183), a filename* (RFC 2231) one too", async () => {
  const raw = mixed(
    "Content-Type: text/plain\n\nkept",
    `Content-Type: text/plain\nContent-Disposition: x-unknown\n\n${CSV}`,
    `Content-Type: text/plain\nContent-Disposition: attachment; filename*=utf-8''%C3%A9.csv\n\n${CSV}`,
  );
  assert.equal((await decodeEmail(raw)).body, "kept");
});

test("attachments are dropped at any depth: mixed inside alternative, alternative inside mixed", async () => {
  // multipart/mixed { multipart/alternative { plain, html }, text/csv attachment }
  const outer =
    'Subject: s\nContent-Type: multipart/mixed; boundary="m"\n\n' +
    '--m\nContent-Type: multipart/alternative; boundary="a"\n\n' +
    "--a\nContent-Type: text/plain\n\nplain body\n" +
    "--a\nContent-Type: text/html\n\n<p>html body</p>\n--a--\n" +
    `--m\nContent-Type: text/csv; name=test.csv\nContent-Disposition: attachment; filename=test.csv\n\n${CSV}\n--m--\n`;
  assert.equal((await decodeEmail(outer)).body, "plain body\nhtml body");
  // multipart/alternative { plain, multipart/mixed { html, text/plain attachment } }
  const inner =
    'Subject: s\nContent-Type: multipart/alternative; boundary="a"\n\n' +
    "--a\nContent-Type: text/plain\n\nplain body\n" +
    '--a\nContent-Type: multipart/mixed; boundary="m"\n\n' +
    "--m\nContent-Type: text/html\n\n<p>html body</p>\n" +
    `--m\nContent-Type: text/plain; name=test.csv\nContent-Disposition: attachment\n\n${CSV}\n--m--\n--a--\n`;
  assert.equal((await decodeEmail(inner)).body, "plain body\nhtml body");
  // An attached multipart: every part inside it belongs to the attachment.
  const attachedTree = mixed(
    "Content-Type: text/plain\n\nbody",
    'Content-Type: multipart/mixed; boundary="x"\nContent-Disposition: attachment\n\n--x\nContent-Type: text/plain\n\nin the attached tree\n--x--',
  );
  assert.equal((await decodeEmail(attachedTree)).body, "body");
});

test("a message whose only part is an attachment has an empty body; its Subject stays", async () => {
  const m = await decodeEmail(
    `Subject: data\nContent-Type: text/csv; name=test.csv\nContent-Disposition: attachment\n\n${CSV}`,
  );
  assert.deepEqual(m, { subject: "data", from: "", body: "" });
});

test("an attached message (message/rfc822, disposition attachment) is dropped; an inline one is read", async () => {
  const embedded = "Subject: inner\nFrom: x@y.z\n\ninner body";
  const attached = mixed(
    "Content-Type: text/plain\n\nsee attached",
    `Content-Type: message/rfc822\nContent-Disposition: attachment; filename="fwd.eml"\n\n${embedded}`,
  );
  assert.equal((await decodeEmail(attached)).body, "see attached");
  const inline = mixed(
    "Content-Type: text/plain\n\nsee below",
    `Content-Type: message/rfc822\nContent-Disposition: inline\n\n${embedded}`,
  );
  assert.equal((await decodeEmail(inline)).body, "see below\ninner\nx@y.z\ninner body");
});
