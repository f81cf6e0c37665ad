// Encoded words in headers are decoded by the body's charset decoder (issue 38, case 5;
// iconv-lite #94): libmime's own decoder has no UTF-7, so "=?unicode-1-1-utf-7?Q?+ANw-...?="
// stayed raw while the same bytes in a body decoded.
import { test } from "node:test";
import assert from "node:assert/strict";
import { decodeEmail } from "../../src/data/text/index.ts";

/** The decoded Subject of a message with this raw Subject line. */
async function subject(raw: string): Promise<string> {
  return (await decodeEmail(`Subject: ${raw}\nFrom: a@example.com\n\nbody`)).subject;
}

test("UTF-7 encoded words in Subject decode, Q and B, under every UTF-7 label", async () => {
  const labels = [
    "unicode-1-1-utf-7",
    "utf-7",
    "UTF-7",
    "utf7",
    "csUnicode11UTF7",
    "x-unicode-2-0-utf-7",
  ];
  for (const label of labels) {
    assert.equal(
      await subject(`=?${label}?Q?+ANw-bermittlungsstatus?=`),
      "Übermittlungsstatus",
      `${label}, Q`,
    );
    assert.equal(
      await subject(`=?${label}?B?K0FOdy1iZXJtaXR0bHVuZ3NzdGF0dXM=?=`),
      "Übermittlungsstatus",
      `${label}, B`,
    );
  }
  assert.equal(
    await subject("Re: =?utf-7?Q?Gr+APwA3w-e_+IKw-?= 5"),
    "Re: Grüße € 5",
    "text around the word, underscore as space",
  );
  assert.equal(
    await subject("=?utf-7?B?K0FOdw==?= =?utf-7?B?LWJlcm1pdHRsdW5nc3N0YXR1cw==?="),
    "Übermittlungsstatus",
    "a UTF-7 run split across two B words is joined before decoding",
  );
});

test("encoded words in other charsets decode as a body in that charset would (B and Q)", async () => {
  const cases: [string, string][] = [
    ["=?koi8-r?B?8NLJ18XU?=", "Привет"],
    ["=?KOI8-R?Q?=F0=D2=C9=D7=C5=D4?=", "Привет"],
    ["=?shift_jis?B?grGC8YLJgr+CzQ==?=", "こんにちは"],
    ["=?gb2312?B?xOO6ww==?=", "你好"],
    ["=?iso-2022-jp?B?GyRCJGsbKEI=?=", "る"],
    ["=?utf-16le?B?RwByAPwA3wBlACAArCA=?=", "Grüße €"],
    ["=?iso-8859-1?Q?=93caf=E9=94_=80?=", "“café” €"],
    ["=?windows-1252?B?k2hplA==?=", "“hi”"],
    ["=?utf-8*en?Q?caf=C3=A9?=", "café"],
    ["=?iso-8859-1?Q?caf=C3=A9?=", "café"],
  ];
  for (const [raw, expected] of cases) assert.equal(await subject(raw), expected, raw);
});

test("an unknown charset in an encoded word reads as an unlabelled body: UTF-8, else Windows-1252", async () => {
  assert.equal(await subject("=?x-no-such-charset?Q?caf=C3=A9?="), "café");
  assert.equal(await subject("=?x-no-such-charset?Q?caf=E9_=80?="), "café €", "not 'caf\uFFFD'");
});

test("From is decoded by the same decoder as Subject", async () => {
  const m = await decodeEmail("Subject: s\nFrom: =?utf-7?Q?Ren+AOk-?= <renee@example.com>\n\nbody");
  assert.equal(m.from, "René <renee@example.com>");
});

test("a body part under a UTF-7 alias (IANA, .NET) decodes as under utf-7", async () => {
  for (const label of ["utf-7", "csUnicode11UTF7", "x-unicode-2-0-utf-7"]) {
    const m = await decodeEmail(
      `Subject: s\nContent-Type: text/plain; charset=${label}\n\n+ANw-bermittlungsstatus`,
    );
    assert.equal(m.body, "Übermittlungsstatus", label);
  }
});

// Found on the SpamAssassin corpus (hard-ham-1/00039): adjacent ISO-2022-JP words are joined
// into "... ESC ( B ESC $ B ...", which TextDecoder reads as U+FFFD.
test("adjacent ISO-2022-JP words (each ending in ASCII mode) join without a U+FFFD between them", async () => {
  assert.equal(
    await subject("=?iso-2022-jp?B?GyRCJTkbKEI=?=\n =?iso-2022-jp?B?GyRCJVEbKEI=?="),
    "スパ",
  );
  const body = Buffer.from("1b2442253925511b2842201b2442253925511b28421b2442253925511b2842", "hex");
  const m = await decodeEmail(
    Buffer.concat([
      Buffer.from("Subject: s\nContent-Type: text/plain; charset=iso-2022-jp\n\n"),
      body,
    ]),
  );
  assert.equal(m.body, "スパ スパスパ");
});
