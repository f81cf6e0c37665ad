import iconv from "iconv-lite";

/**
 * Bytes to text: character-set names resolved and decoded with iconv-lite (Windows-125x,
 * ISO-8859-x, CJK code pages, UTF-16/32, UTF-7, ...), the same tables on every Node version.
 *
 * Why not TextDecoder alone: on Node 20, TextDecoder("windows-1252") (and every Latin-1 /
 * ASCII label, which the WHATWG Encoding Standard maps to windows-1252) decodes as ISO-8859-1,
 * so bytes 0x80-0x9F become C1 control characters instead of curly quotes, dashes and the euro
 * sign; it has no UTF-7 either. TextDecoder is used only to resolve a label by the WHATWG
 * rules and for the few encodings iconv-lite lacks (ISO-2022-JP).
 */

/** The default file encoding: UTF-8, or Windows-1252 when the bytes are not valid UTF-8. */
export const AUTO_ENCODING = "auto";

const UTF8_STRICT = new TextDecoder("utf-8", { fatal: true });
const UTF8_LENIENT = new TextDecoder("utf-8", { ignoreBOM: true });

/** A resolved encoding: how to turn bytes into text. */
export interface Charset {
  /** The canonical name (e.g. "windows-1252", "utf-8", "shift_jis", "utf-7"). */
  name: string;
  /** Decodes bytes; never throws (undecodable bytes become U+FFFD). */
  decode(bytes: Uint8Array): string;
}

function buffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes)
    ? bytes
    : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** The WHATWG name of a label (TextDecoder's resolution), or null when it is not one. */
function whatwgName(label: string): string | null {
  try {
    const name = new TextDecoder(label).encoding;
    // "replacement" (ISO-2022-KR, HZ-GB-2312, ...) decodes everything to U+FFFD: not a decoder.
    return name === "replacement" ? null : name;
  } catch {
    return null;
  }
}

function iconvCharset(name: string): Charset {
  return { name, decode: (bytes) => iconv.decode(buffer(bytes), name) };
}

/**
 * Resolves a character-set label (a MIME charset parameter or an --encoding value) to a
 * decoder. Latin-1 and ASCII labels ("iso-8859-1", "latin1", "us-ascii", ...) resolve to
 * Windows-1252 as the WHATWG Encoding Standard (browsers, mail clients) prescribes; other
 * labels known to iconv-lite decode with it (UTF-7 included); the rest of the WHATWG labels
 * (ISO-2022-JP) with TextDecoder.
 *
 * @param label any case, surrounding spaces ignored.
 * @returns the decoder, or null for an unknown label (or an empty one).
 * @example resolveCharset("ISO-8859-1")?.decode(Uint8Array.of(0x93, 0x68, 0x69, 0x94)) // "“hi”"
 */
export function resolveCharset(label: string): Charset | null {
  const key = label.trim().toLowerCase();
  if (key === "" || key === AUTO_ENCODING) return null;
  const whatwg = whatwgName(key);
  if (whatwg === "windows-1252") return iconvCharset("windows-1252");
  if (whatwg === "utf-8") return iconvCharset("utf-8");
  // iconv-lite's own reading of a label it knows (e.g. "utf-16": byte-order mark, then LE).
  if (iconv.encodingExists(key)) return iconvCharset(key);
  if (whatwg !== null) {
    if (iconv.encodingExists(whatwg)) return iconvCharset(whatwg);
    const decoder = new TextDecoder(whatwg);
    return { name: whatwg, decode: (bytes) => decoder.decode(bytes) };
  }
  return null;
}

/**
 * Whether `bytes` are valid UTF-8 (an empty array is).
 *
 * @example isUtf8(Uint8Array.of(0xc3, 0xa9)) // true; isUtf8(Uint8Array.of(0xe9)) // false
 */
export function isUtf8(bytes: Uint8Array): boolean {
  try {
    UTF8_STRICT.decode(bytes);
    return true;
  } catch {
    return false;
  }
}

/**
 * Bytes to a string: UTF-8 after a UTF-8 byte-order mark (removed; invalid bytes become
 * U+FFFD) or when the bytes are valid UTF-8, otherwise Windows-1252 (which maps every byte),
 * so no input is an error. This is the "auto" encoding of text files and the fallback for
 * e-mail parts with no or an unknown charset.
 *
 * @param bytes any bytes (empty gives "").
 * @returns the decoded string.
 * @example decodeBytes(Uint8Array.of(0x93, 0x41, 0x94)) // "“A”" (not UTF-8: Windows-1252)
 */
export function decodeBytes(bytes: Uint8Array): string {
  // A UTF-8 byte-order mark declares the encoding: decode as UTF-8 (a stray invalid byte
  // becomes U+FFFD) rather than reading the whole file, BOM included, as Windows-1252.
  if (bytes.length >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf)
    return UTF8_LENIENT.decode(bytes.subarray(3));
  try {
    return UTF8_STRICT.decode(bytes);
  } catch {
    return iconv.decode(buffer(bytes), "windows-1252");
  }
}

/**
 * Checks an --encoding value: "auto" or a label {@link resolveCharset} knows.
 *
 * @returns the value, lower-cased and trimmed.
 * @throws RangeError naming the value and what is expected.
 * @example checkEncoding(" Latin1 ") // "latin1"
 */
export function checkEncoding(encoding: string): string {
  const key = encoding.trim().toLowerCase();
  if (key !== AUTO_ENCODING && resolveCharset(key) === null)
    throw new RangeError(
      `unknown encoding ${JSON.stringify(encoding)}: expected auto (UTF-8, else Windows-1252) or a character set such as utf-8, windows-1252, iso-8859-15, utf-16le, shift_jis, utf-7`,
    );
  return key;
}
