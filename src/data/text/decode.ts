/**
 * Robust decoding of text: bytes of unknown encoding to a string, and e-mail messages (headers
 * and MIME bodies in mixed transfer encodings and charsets) to plain text a tokenizer can read.
 * Nothing here throws on malformed input: what cannot be decoded is kept as it is or dropped.
 */

const UTF8 = new TextDecoder("utf-8", { fatal: true });
const UTF8_LENIENT = new TextDecoder("utf-8", { ignoreBOM: true });
const LATIN = new TextDecoder("windows-1252");

/**
 * Bytes to a string: UTF-8 after a UTF-8 byte-order mark (removed; invalid bytes become
 * U+FFFD) or when the bytes are valid UTF-8, otherwise Windows-1252 (a superset of ISO-8859-1
 * that maps every byte), so no input is an error.
 *
 * @param bytes any bytes (empty gives "").
 * @returns the decoded string.
 */
export function decodeBytes(bytes: Uint8Array): string {
  // A UTF-8 byte-order mark declares the encoding: decode as UTF-8 (a stray invalid byte
  // becomes U+FFFD) rather than reading the whole file, BOM included, as Windows-1252.
  if (bytes.length >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf)
    return UTF8_LENIENT.decode(bytes.subarray(3));
  try {
    return UTF8.decode(bytes);
  } catch {
    return LATIN.decode(bytes);
  }
}

/** The bytes of a binary string (each char code 0..255 one byte; higher codes keep their low byte). */
function binaryBytes(s: string): Uint8Array {
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i) & 0xff;
  return out;
}

/** Decodes bytes in a named charset, falling back to {@link decodeBytes} for unknown labels. */
function decodeCharset(bytes: Uint8Array, charset: string | undefined): string {
  if (charset !== undefined && !/^(us-)?ascii$|^utf-?8$/i.test(charset)) {
    try {
      return new TextDecoder(charset.toLowerCase()).decode(bytes);
    } catch {
      // Unknown label: fall through.
    }
  }
  return decodeBytes(bytes);
}

/**
 * Decodes quoted-printable text (RFC 2045 section 6.7): soft line breaks removed, =XX escapes
 * turned into bytes, then the bytes decoded in `charset`.
 */
export function decodeQuotedPrintable(text: string, charset?: string): string {
  const binary = text
    .replace(/=\r?\n/g, "")
    .replace(/=([0-9A-Fa-f]{2})/g, (_, h: string) => String.fromCharCode(parseInt(h, 16)));
  // Chars above 0xff (already-decoded text) are kept as UTF-8 bytes.
  for (let i = 0; i < binary.length; i++) if (binary.charCodeAt(i) > 0xff) return binary;
  return decodeCharset(binaryBytes(binary), charset);
}

/** Decodes base64 text (whitespace and junk ignored) in `charset`; "" when it is not base64 at all. */
export function decodeBase64(text: string, charset?: string): string {
  const clean = text.replace(/[^A-Za-z0-9+/=]/g, "");
  return decodeCharset(Buffer.from(clean, "base64"), charset);
}

/** Decodes RFC 2047 encoded words (=?charset?B|Q?...?=) in a header value. */
export function decodeHeaderWords(value: string): string {
  return value
    .replace(/\?=\s+=\?/g, "?==?")
    .replace(
      /=\?([^?]+)\?([bBqQ])\?([^?]*)\?=/g,
      (_, charset: string, kind: string, data: string) =>
        kind.toUpperCase() === "B"
          ? decodeBase64(data, charset)
          : decodeQuotedPrintable(data.replace(/_/g, " "), charset),
    );
}

/** Parses a header block into lower-case names -> unfolded values (the first of repeated names). */
function parseHeaders(block: string): Map<string, string> {
  const headers = new Map<string, string>();
  const unfolded = block.replace(/\r?\n[ \t]+/g, " ");
  for (const line of unfolded.split(/\r?\n/)) {
    const m = /^([!-9;-~]+):\s*(.*)$/.exec(line);
    if (m !== null && !headers.has(m[1].toLowerCase())) headers.set(m[1].toLowerCase(), m[2]);
  }
  return headers;
}

/** Splits a message or MIME part at its first empty line into header block and body. */
function splitHead(raw: string): [string, string] {
  const m = /\r?\n\r?\n/.exec(raw);
  return m === null ? [raw, ""] : [raw.slice(0, m.index), raw.slice(m.index + m[0].length)];
}

function parameter(value: string | undefined, name: string): string | undefined {
  if (value === undefined) return undefined;
  const m = new RegExp(`${name}\\s*=\\s*(?:"([^"]*)"|([^;\\s]+))`, "i").exec(value);
  return m === null ? undefined : (m[1] ?? m[2]);
}

/** Replaces HTML markup with spaces and decodes the common entities. */
export function stripHtml(html: string): string {
  return html
    .replace(/<(script|style)[^>]*>[\s\S]*?<\/\1\s*>/gi, " ")
    .replace(/<!--[\s\S]*?-->/g, " ")
    .replace(/<[^>]*>/g, " ")
    .replace(/&nbsp;/gi, " ")
    .replace(/&amp;/gi, "&")
    .replace(/&lt;/gi, "<")
    .replace(/&gt;/gi, ">")
    .replace(/&quot;/gi, '"')
    .replace(/&#(\d+);/g, (_, d: string) => {
      const code = Number(d);
      return code > 0 && code < 0x110000 ? String.fromCodePoint(code) : " ";
    });
}

/** The readable text of one MIME entity (recursing into multiparts), at most `depth` levels deep. */
function entityText(headers: Map<string, string>, body: string, depth: number): string {
  const type = (headers.get("content-type") ?? "text/plain").toLowerCase();
  const boundary = parameter(headers.get("content-type"), "boundary");
  if (type.startsWith("multipart/") && boundary !== undefined && depth > 0) {
    const parts = body.split(`--${boundary}`).slice(1);
    const texts: string[] = [];
    for (const part of parts) {
      if (part.startsWith("--")) break;
      const [head, partBody] = splitHead(part.replace(/^\r?\n/, ""));
      const text = entityText(parseHeaders(head), partBody, depth - 1);
      if (text.trim() !== "") texts.push(text);
    }
    return texts.join("\n");
  }
  if (!type.startsWith("text/") && !type.startsWith("multipart/") && !type.startsWith("message/"))
    return "";
  const charset = parameter(headers.get("content-type"), "charset");
  const encoding = (headers.get("content-transfer-encoding") ?? "").trim().toLowerCase();
  let text = body;
  if (encoding === "base64") text = decodeBase64(body, charset);
  else if (encoding === "quoted-printable") text = decodeQuotedPrintable(body, charset);
  return type.startsWith("text/html") ? stripHtml(text) : text;
}

/** A decoded e-mail message. */
export interface DecodedMessage {
  /** The Subject header, encoded words decoded ("" when absent). */
  subject: string;
  /** The From header, decoded ("" when absent). */
  from: string;
  /** The readable body: text/plain and text/html parts (markup removed), decoded. */
  body: string;
}

/**
 * Decodes an RFC 5322 message: headers unfolded and RFC 2047 words decoded; the body's MIME
 * tree walked (multiparts up to 8 levels), base64 and quoted-printable parts decoded in their
 * charset (unknown charsets: UTF-8, else Windows-1252), HTML reduced to its text, attachments
 * (non-text parts) dropped. Never throws: an empty or header-less message gives empty fields.
 *
 * @param raw the message with headers (a leading mbox "From " line is ignored).
 * @returns subject, from and body text.
 */
export function decodeEmail(raw: string): DecodedMessage {
  const [head, body] = splitHead(raw.replace(/^From [^\n]*\n/, ""));
  const headers = parseHeaders(head);
  // A message without a header block (no "Name: value" line) is all body.
  if (headers.size === 0) return { subject: "", from: "", body: raw };
  return {
    subject: decodeHeaderWords(headers.get("subject") ?? ""),
    from: decodeHeaderWords(headers.get("from") ?? ""),
    body: entityText(headers, body, 8),
  };
}

/**
 * The text a classifier reads from a message: "subject from body", whitespace collapsed.
 *
 * @param raw the message with headers.
 */
export function emailText(raw: string): string {
  const m = decodeEmail(raw);
  return `${m.subject}\n${m.from}\n${m.body}`.replace(/\s+/g, " ").trim();
}
