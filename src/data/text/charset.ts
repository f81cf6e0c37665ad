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

/**
 * The default file encoding: UTF-16 after a UTF-16 byte-order mark (FF FE little-endian, FE FF
 * big-endian), otherwise UTF-8, or Windows-1252 when the bytes are not valid UTF-8.
 */
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

// UTF-7 labels iconv-lite does not know (it knows utf-7, utf7 and unicode-1-1-utf-7): the IANA
// aliases (csUTF7, csUnicode11UTF7) and those .NET and Outlook write (codepage 65000).
const UTF7_ALIASES = new Set([
  "csutf7",
  "csunicode11utf7",
  "unicode-2-0-utf-7",
  "x-unicode-1-1-utf-7",
  "x-unicode-2-0-utf-7",
]);

function iconvCharset(name: string): Charset {
  return { name, decode: (bytes) => iconv.decode(buffer(bytes), name) };
}

/**
 * ISO-2022-JP bytes without the escape sequences (ESC and two bytes) that another escape
 * sequence follows at once: they switch to a mode no character is read in, so the text is the
 * same, but the WHATWG decoder (TextDecoder) turns each such pair into U+FFFD. Mailers write
 * them where two RFC 2047 encoded words are joined ("ESC ( B" ending one word, "ESC $ B"
 * opening the next), as RFC 2047 asks each word to end in ASCII mode.
 */
function dropEmptyEscapes(bytes: Uint8Array): Uint8Array {
  const out: number[] = [];
  for (let i = 0; i < bytes.length; i++) {
    if (bytes[i] === 0x1b && i + 3 < bytes.length && bytes[i + 3] === 0x1b) {
      i += 2;
      continue;
    }
    out.push(bytes[i]);
  }
  return out.length === bytes.length ? bytes : Uint8Array.from(out);
}

/**
 * Resolves a character-set label (a MIME charset parameter or an --encoding value) to a
 * decoder. Latin-1 and ASCII labels ("iso-8859-1", "latin1", "us-ascii", ...) resolve to
 * Windows-1252 as the WHATWG Encoding Standard (browsers, mail clients) prescribes; other
 * labels known to iconv-lite decode with it (UTF-7 included, under its IANA and .NET aliases
 * too: csUnicode11UTF7, x-unicode-2-0-utf-7, ...); the rest of the WHATWG labels (ISO-2022-JP)
 * with TextDecoder. E-mail parts and RFC 2047 encoded words in headers both decode through it.
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
  if (UTF7_ALIASES.has(key)) return iconvCharset("utf-7");
  // iconv-lite's own reading of a label it knows (e.g. "utf-16": byte-order mark, then LE).
  if (iconv.encodingExists(key)) return iconvCharset(key);
  if (whatwg !== null) {
    if (iconv.encodingExists(whatwg)) return iconvCharset(whatwg);
    const decoder = new TextDecoder(whatwg);
    if (whatwg === "iso-2022-jp")
      return { name: whatwg, decode: (bytes) => decoder.decode(dropEmptyEscapes(bytes)) };
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
 * The encoding a byte-order mark at the start of `bytes` declares: "utf-8" (EF BB BF),
 * "utf-16le" (FF FE) or "utf-16be" (FE FF); null without one.
 *
 * @example byteOrderMark(Uint8Array.of(0xff, 0xfe, 0x41, 0x00)) // "utf-16le"
 */
export function byteOrderMark(bytes: Uint8Array): "utf-8" | "utf-16le" | "utf-16be" | null {
  if (bytes.length >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf)
    return "utf-8";
  if (bytes.length >= 2 && bytes[0] === 0xff && bytes[1] === 0xfe) return "utf-16le";
  if (bytes.length >= 2 && bytes[0] === 0xfe && bytes[1] === 0xff) return "utf-16be";
  return null;
}

/**
 * Bytes to a string: UTF-16 after a UTF-16 byte-order mark (FF FE little-endian, FE FF
 * big-endian; the mark removed), UTF-8 after a UTF-8 byte-order mark (removed; invalid bytes
 * become U+FFFD) or when the bytes are valid UTF-8, otherwise Windows-1252 (which maps every
 * byte), so no input is an error. This is the "auto" encoding of text files and the fallback
 * for e-mail parts with no or an unknown charset. UTF-16 without a byte-order mark is not
 * recognised (see {@link utf16Guess}).
 *
 * @param bytes any bytes (empty gives "").
 * @returns the decoded string.
 * @example decodeBytes(Uint8Array.of(0x93, 0x41, 0x94)) // "“A”" (not UTF-8: Windows-1252)
 * @example decodeBytes(Uint8Array.of(0xff, 0xfe, 0x41, 0x00)) // "A" (UTF-16LE after its mark)
 */
export function decodeBytes(bytes: Uint8Array): string {
  const bom = byteOrderMark(bytes);
  // A UTF-8 byte-order mark declares the encoding: decode as UTF-8 (a stray invalid byte
  // becomes U+FFFD) rather than reading the whole file, BOM included, as Windows-1252.
  if (bom === "utf-8") return UTF8_LENIENT.decode(bytes.subarray(3));
  // So does a UTF-16 one (Windows Notepad's "Unicode", Excel's "Unicode text"): without this,
  // every other byte of ASCII text is a NUL and the text reads as Windows-1252 garbage.
  if (bom !== null) return iconv.decode(buffer(bytes.subarray(2)), bom);
  try {
    return UTF8_STRICT.decode(bytes);
  } catch {
    return iconv.decode(buffer(bytes), "windows-1252");
  }
}

/**
 * Whether bytes without a byte-order mark look like UTF-16 text: at least a quarter of them
 * are NUL bytes (ASCII characters in UTF-16 are half NULs; no text file holds that many).
 *
 * @returns "utf-16le" when the NULs sit mostly at odd offsets (after each character's low
 *   byte), "utf-16be" when mostly at even ones, null when the bytes do not look like UTF-16
 *   (or start with a byte-order mark, which {@link decodeBytes} honours).
 * @example utf16Guess(Uint8Array.of(0x61, 0x00, 0x62, 0x00)) // "utf-16le"
 */
export function utf16Guess(bytes: Uint8Array): "utf-16le" | "utf-16be" | null {
  if (bytes.length < 2 || byteOrderMark(bytes) !== null) return null;
  let even = 0;
  let odd = 0;
  for (let i = 0; i < bytes.length; i++)
    if (bytes[i] === 0) {
      if (i % 2 === 0) even++;
      else odd++;
    }
  if (4 * (even + odd) < bytes.length) return null;
  return odd >= even ? "utf-16le" : "utf-16be";
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
      `unknown encoding ${JSON.stringify(encoding)}: expected auto (a UTF-16 byte-order mark, else UTF-8, else Windows-1252) or a character set such as utf-8, windows-1252, iso-8859-15, utf-16le, shift_jis, utf-7`,
    );
  return key;
}
