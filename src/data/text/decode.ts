import { finished } from "node:stream/promises";
import { Splitter, type MimeNode } from "@zone-eu/mailsplit";
import { decodeHTMLStrict } from "entities";
import { compile } from "html-to-text";
import libbase64 from "libbase64";
import libmime from "libmime";
import libqp from "libqp";
import { InputError } from "../../util/errors.ts";
import { decodeBytes, isUtf8, resolveCharset, type Charset } from "./charset.ts";

/**
 * E-mail messages to the plain text a tokenizer reads, on maintained libraries:
 *
 * - MIME structure (header blocks, multipart trees with nested and mid-line boundary strings,
 *   embedded message/rfc822 parts, mbox "From " lines): @zone-eu/mailsplit, the splitter
 *   under mailparser;
 * - RFC 2047 encoded words in Subject and From (adjacent words joined before decoding, so a
 *   character split across two words survives): libmime's reader, with each word's bytes
 *   decoded by the same charset decoder as the body's (libmime's own refuses UTF-7, which
 *   smuggles markup past HTML filters, a risk for text that is never rendered as HTML, and
 *   reads unknown labels as UTF-8): "=?unicode-1-1-utf-7?Q?+ANw-bermittlungsstatus?=" is
 *   "Übermittlungsstatus";
 * - attachments: a part with Content-Disposition: attachment (or another type than inline, as
 *   RFC 2183 asks), or without a disposition but with a file name (name= on Content-Type, as
 *   enmime and mail clients read it), is a file that came with the message, not its text, even
 *   when it is text/plain or text/csv; mailsplit parses both headers (RFC 2231 included);
 * - transfer encodings: libqp (quoted-printable, soft line breaks with trailing white space)
 *   and libbase64;
 * - character sets: iconv-lite through ./charset.ts (Windows-1252 for Latin-1 and ASCII
 *   labels, UTF-7, CJK code pages);
 * - HTML: html-to-text (markup dropped, character references decoded); character references
 *   left in plain-text parts (mailers that turned HTML into text without decoding it) or after
 *   the conversion (double-escaped "&amp;amp;") are decoded once with entities (the decoder
 *   under html-to-text's parser).
 *
 * Why not mailparser or postal-mime: mailparser (in maintenance mode) refuses to decode UTF-7
 * bodies on purpose (it guards HTML renderers; this text is never rendered) and postal-mime
 * decodes charsets with TextDecoder, which reads Windows-1252 as Latin-1 on Node 20 (C1
 * control characters) and has no UTF-7. Both keep the bytes of a part out of reach of a
 * charset decoder of our choice; mailsplit hands over the raw part. The glue left here is which
 * parts are text and in which order, and the rules for charsets the corpus needs.
 */

/** A message (or one of its parts) the MIME parser or the HTML converter cannot read. */
export class EmailDecodeError extends InputError {
  override name = "EmailDecodeError";
}

/** A decoded e-mail message. */
export interface DecodedMessage {
  /** The Subject header, encoded words decoded ("" when absent). */
  subject: string;
  /** The From header, encoded words decoded ("" when absent). */
  from: string;
  /**
   * The readable body: every text/* (and non-rfc822 message/*) part that is not an attachment,
   * and the text of embedded messages that are not attachments, in message order, HTML reduced
   * to its text, joined by newlines. Attachments (Content-Disposition other than inline, or a
   * file name without a disposition) are dropped whatever their type: a CSV or text file sent
   * with the message is not its text.
   */
  body: string;
}

/** Options of {@link decodeEmail}. */
export interface DecodeEmailOptions {
  /** The message's name in error messages (e.g. "spam-2/00123") ["message"]. */
  name?: string;
}

/** One leaf part as the splitter delivered it. */
interface RawPart {
  node: MimeNode;
  chunks: Buffer[];
}

const htmlConverter = compile({
  wordwrap: false,
  // The whole document, not only <body>: mail HTML often goes on after </body> or </html>
  // (browsers show that text; scripts and styles are never text).
  baseElements: { selectors: [], returnDomByDefault: true },
  selectors: [
    { selector: "a", options: { ignoreHref: true } },
    { selector: "img", format: "skip" },
    ...["h1", "h2", "h3", "h4", "h5", "h6"].map((selector) => ({
      selector,
      options: { uppercase: false },
    })),
    // Layout tables (most HTML mail): a cell per line, not run into its neighbours ("Price$5").
    { selector: "table", format: "block" },
    { selector: "tr", format: "block" },
    { selector: "th", format: "block" },
    { selector: "td", format: "block" },
  ],
});

/**
 * The text of an HTML document or fragment (the title and whatever follows </body> included):
 * markup, scripts, styles, link targets and images dropped, character references (named,
 * decimal, hexadecimal) decoded, block elements and table cells on lines of their own, no line
 * wrapping. An unterminated comment ("<!--" without "-->") hides the rest, as in a browser.
 *
 * @throws whatever html-to-text throws on input it cannot convert (decodeEmail wraps it).
 * @example htmlToText("<p>Fish &amp; chips&nbsp;&#8364;5</p>") // "Fish & chips\u00a0€5"
 */
export function htmlToText(html: string): string {
  return htmlConverter(html);
}

// WHATWG MIME sniffing (section 7.1, "identify an unknown MIME type"): a resource without a
// type whose first bytes after white space open one of these tags is HTML.
const SNIFF_HTML =
  /^\s*<(?:!doctype html|html|head|script|iframe|h1|div|font|table|a|style|title|b|body|br|p)[\s>]|^\s*<!--/i;
// C0 controls other than tab and line breaks, DEL and C1 controls: not text (in the corpus
// they are bytes of other charsets that its packager decoded as UTF-8).
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROLS = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/g;
// A header field name (RFC 5322: printable ASCII except colon).
const FIELD_NAME = /^[!-9;-~]+$/;

function isAscii(bytes: Uint8Array): boolean {
  for (let i = 0; i < bytes.length; i++) if (bytes[i] >= 0x80) return false;
  return true;
}

/**
 * Bytes of a part in its charset. No, an unknown or a UTF-8 label: UTF-8, else Windows-1252
 * (mislabelled parts are common). A Latin-1, ASCII or Windows-1252 label on bytes that are valid
 * UTF-8 with non-ASCII characters: UTF-8 (mailers put these labels on UTF-8 text by default;
 * real Windows-1252 text is not valid multi-byte UTF-8 but for mojibake such as "Ã©").
 */
function decodeCharset(bytes: Buffer, charset: Charset | null): string {
  if (charset === null || charset.name === "utf-8") return decodeBytes(bytes);
  if (charset.name === "windows-1252" && !isAscii(bytes) && isUtf8(bytes))
    return bytes.toString("utf8");
  return charset.decode(bytes);
}

/** Splits a message into its root node and leaf parts. @throws EmailDecodeError. */
async function splitMessage(
  bytes: Buffer,
  name: string,
): Promise<{ root: MimeNode | null; parts: RawPart[] }> {
  // Embedded messages stay leaves: partText decodes them as messages of their own.
  const splitter = new Splitter({ ignoreEmbedded: true });
  const parts: RawPart[] = [];
  let root: MimeNode | null = null;
  let current: RawPart | null = null;
  splitter.on("data", (chunk) => {
    if (chunk.type === "node") {
      root ??= chunk;
      current = chunk.multipart ? null : { node: chunk, chunks: [] };
      if (current !== null) parts.push(current);
    } else if (chunk.type === "body" && current !== null) current.chunks.push(chunk.value);
  });
  try {
    const done = finished(splitter);
    splitter.end(bytes);
    await done;
  } catch (e) {
    throw new EmailDecodeError(
      `${name}: the MIME parser cannot read the message (${(e as Error).message})`,
    );
  }
  return { root, parts };
}

/**
 * Whether a MIME part is an attachment (a file sent with the message) rather than part of the
 * message's text, from the headers mailsplit parsed (Content-Disposition and Content-Type with
 * their RFC 2231 parameters): a disposition other than inline ("attachment", or an unknown type,
 * which RFC 2183 says to treat as attachment), or no disposition and a file name (Content-Type
 * name=, as enmime reads it). An inline part counts as text even when it has a file name. A part
 * inside an attached multipart (other than the message's root) is an attachment too.
 *
 * @param node a node from mailsplit's Splitter.
 * @example isAttachment(node) // true for a part headed only "Content-Type: text/plain; name=test.csv"
 */
function isAttachment(node: MimeNode): boolean {
  const marked = (n: MimeNode): boolean =>
    n.disposition !== false ? n.disposition !== "inline" : n.filename !== false;
  if (marked(node)) return true;
  for (let n = node.parentNode; n !== false && !n.root; n = n.parentNode)
    if (marked(n as MimeNode)) return true;
  return false;
}

/**
 * The text of one leaf part, or null when it is not text (images, applications, ...) or an
 * attachment; an embedded message/rfc822 part gives its subject, sender and body, `depth`
 * levels deep.
 *
 * `alreadyText`: the message came as a string, so bytes outside a transfer encoding are the
 * UTF-8 of text already decoded (the corpus package stores messages so); only base64 and
 * quoted-printable parts (and 7-bit parts, e.g. UTF-7) carry bytes in the part's charset.
 */
async function partText(
  part: RawPart,
  alreadyText: boolean,
  where: string,
  depth: number,
): Promise<string | null> {
  const { node } = part;
  if (isAttachment(node)) return null;
  const type = (node.contentType || "text/plain").toLowerCase();
  if (node.rfc822) {
    // An embedded (forwarded, bounced) message: its own subject, sender and text.
    if (depth <= 0) return null;
    const inner = await decodeMessage(Buffer.concat(part.chunks), alreadyText, where, depth - 1);
    return [inner.subject, inner.from, inner.body].filter((t) => t !== "").join("\n");
  }
  if (!type.startsWith("text/") && !type.startsWith("message/")) return null;
  const raw = Buffer.concat(part.chunks);
  const encoding = node.encoding || "7bit";
  const charset = node.charset ? resolveCharset(node.charset) : null;
  let text: string;
  if (alreadyText && encoding !== "base64" && !isAscii(raw)) {
    // Non-ASCII characters of a string message are text already; quoted-printable escapes
    // around them are still bytes in the part's charset.
    const literal = raw.toString("utf8");
    text =
      encoding === "quoted-printable"
        ? literal.replace(/[^\u0080-\uffff]+/g, (ascii) =>
            decodeCharset(libqp.decode(ascii), charset),
          )
        : literal;
  } else {
    const bytes =
      encoding === "base64"
        ? libbase64.decode(raw.toString("latin1"))
        : encoding === "quoted-printable"
          ? libqp.decode(raw)
          : raw;
    text = decodeCharset(bytes, charset);
  }
  if (node.flowed) text = libmime.decodeFlowed(text, node.delSp);
  const untyped = node.headers === false || !node.headers.hasHeader("content-type");
  return readableText(text, type, untyped, where);
}

/**
 * The readable text of a decoded part (or of a message without headers, all body): HTML (typed
 * so, or untyped and opening with an HTML tag) reduced to its text, then character references
 * decoded once.
 *
 * @throws EmailDecodeError when the HTML cannot be converted.
 */
function readableText(text: string, type: string, untyped: boolean, where: string): string {
  if (type === "text/html" || (untyped && SNIFF_HTML.test(text))) {
    try {
      text = htmlToText(text);
    } catch (e) {
      throw new EmailDecodeError(
        `${where} (${type}): cannot convert the HTML to text (${(e as Error).message})`,
      );
    }
  }
  // Character references in plain-text parts (mailers that turned HTML into text without
  // decoding it) and double-escaped ones in HTML ("&amp;amp;"): what the sender meant.
  return text.includes("&") ? decodeHTMLStrict(text) : text;
}

/**
 * libmime's encoded-word reader (Q and B words, adjacent words of one charset joined before
 * decoding, RFC 2231 language tags dropped) with each word's bytes decoded as a body part's are
 * ({@link decodeCharset}: every label iconv-lite or the WHATWG table knows, UTF-7 and its
 * aliases included; an unknown label is UTF-8, else Windows-1252).
 */
class HeaderWords extends libmime.Libmime {
  override decodeWord(charset: string, encoding: string, text: string): string {
    // libmime's Q / B decoding, to bytes: in the charset "binary" every byte is the character
    // of its own code, which Latin-1 turns back into the byte.
    const bytes = Buffer.from(super.decodeWord("binary", encoding, text), "latin1");
    return decodeCharset(bytes, resolveCharset(charset.split("*")[0]));
  }
}

const headerWords = new HeaderWords();

/**
 * The first `key` header of the root, unfolded, encoded words decoded. The raw line's bytes are
 * read here rather than by mailsplit's getFirst, which falls back to Latin-1 for a whole line
 * with one invalid UTF-8 byte (and turns a U+FFFD the corpus already holds into "ï¿½").
 */
function headerText(root: MimeNode, key: string, alreadyText: boolean): string {
  const line =
    root.headers === false ? undefined : root.headers.getList().find((h) => h.key === key)?.line;
  if (line === undefined) return "";
  const bytes = Buffer.from(line, "latin1");
  const text = alreadyText ? bytes.toString("utf8") : decodeBytes(bytes);
  const value = text
    .slice(text.indexOf(":") + 1)
    .replace(/\r?\n[ \t]/g, " ")
    .trim();
  return headerWords.decodeWords(value).replace(CONTROLS, " ");
}

/**
 * Decodes an RFC 5322 message: Subject and From with their encoded words decoded; the MIME
 * tree walked, base64 and quoted-printable parts decoded in their charset (Latin-1 and ASCII
 * labels read as Windows-1252; no, unknown or UTF-8 labels: UTF-8, else Windows-1252), HTML
 * (and untyped parts that open with an HTML tag) reduced to text, character references
 * decoded, parts of other types and attachments (Content-Disposition other than inline, or a
 * file name without a disposition; see isAttachment) dropped, control characters (C0 except
 * tab and line breaks, C1) replaced by spaces. A message without a header block is all body, read as an untyped
 * body after headers is (HTML sniffed and reduced, character references decoded).
 *
 * @param raw the message: bytes, or a string whose non-ASCII characters are already decoded
 *   (as the corpus package stores it; base64 / quoted-printable parts are still decoded in
 *   their charset). A leading mbox "From " line is ignored.
 * @param options.name the message's name in errors.
 * @returns subject, from and body text.
 * @throws EmailDecodeError (an InputError) naming the message when the MIME parser cannot read
 *   it (e.g. a header block over 1 MiB, more than 1000 parts) or a part's HTML cannot be
 *   converted (e.g. nested thousands of elements deep); TypeError when raw is neither a string
 *   nor bytes.
 * @example (await decodeEmail("Subject: =?utf-8?q?caf=C3=A9?=\n\nhi &amp; bye")).body // "hi & bye"
 */
export async function decodeEmail(
  raw: string | Uint8Array,
  options: DecodeEmailOptions = {},
): Promise<DecodedMessage> {
  if (typeof raw !== "string" && !(raw instanceof Uint8Array))
    throw new TypeError(
      `decodeEmail: raw must be a string or a Uint8Array (the message), got ${raw === null ? "null" : typeof raw}`,
    );
  const alreadyText = typeof raw === "string";
  const bytes = alreadyText
    ? Buffer.from(raw, "utf8")
    : Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
  return decodeMessage(bytes, alreadyText, options.name ?? "message", MAX_EMBEDDED);
}

/** Embedded messages read inside a message (deeper ones are dropped). */
const MAX_EMBEDDED = 4;

async function decodeMessage(
  bytes: Buffer,
  alreadyText: boolean,
  name: string,
  depth: number,
): Promise<DecodedMessage> {
  const { root, parts } = await splitMessage(bytes, name);
  const headed =
    root !== null &&
    root.headers !== false &&
    root.headers.getList().some((h) => FIELD_NAME.test(h.key));
  if (root === null || !headed) {
    // All body, read as an untyped body after headers is: HTML sniffed, references decoded.
    const text = alreadyText ? bytes.toString("utf8") : decodeBytes(bytes);
    const body = readableText(text, "text/plain", true, `${name}: body`);
    return { subject: "", from: "", body: body.replace(CONTROLS, " ") };
  }
  const texts: string[] = [];
  for (const [i, part] of parts.entries()) {
    const nr = part.node.partNr
      ? part.node.partNr.filter((n) => typeof n === "number").join(".")
      : `${i + 1}`;
    const where = `${name}: part ${nr === "" ? "1" : nr}`;
    const text = await partText(part, alreadyText, where, depth);
    if (text !== null && text.trim() !== "") texts.push(text);
  }
  return {
    subject: headerText(root, "subject", alreadyText),
    from: headerText(root, "from", alreadyText),
    body: texts.join("\n").replace(CONTROLS, " "),
  };
}

/**
 * The text a classifier reads from a message: "subject from body", white space collapsed.
 *
 * @param raw the message (see {@link decodeEmail}).
 * @throws EmailDecodeError as {@link decodeEmail}.
 * @example await emailText("Subject: Hi\nFrom: a@b.c\n\n<html><p>Win&nbsp;&#36;5</p>") // "Hi a@b.c Win $5"
 */
export async function emailText(
  raw: string | Uint8Array,
  options: DecodeEmailOptions = {},
): Promise<string> {
  const m = await decodeEmail(raw, options);
  return `${m.subject}\n${m.from}\n${m.body}`.replace(/\s+/g, " ").trim();
}
