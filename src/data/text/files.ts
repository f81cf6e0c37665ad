import { readFileSync } from "node:fs";
import { parse } from "csv-parse/sync";
import { DuplicateKeyError, parseJsonStrict } from "../../io/strictJson.ts";
import { InputError } from "../../util/errors.ts";
import { ContentHasher } from "../identity.ts";
import { AUTO_ENCODING, checkEncoding, decodeBytes, isUtf8, resolveCharset, utf16Guess } from "./charset.ts";
import { preview } from "./truncate.ts";

/**
 * User text data: CSV (a header row naming the columns) and JSONL (one JSON object per line)
 * files, read as bytes and decoded in the given encoding (iconv-lite, ./charset.ts) or, by
 * default ("auto"), as UTF-16 after its byte-order mark, else UTF-8 with or without BOM, else
 * Windows-1252. Errors name the file and the physical line where the record starts (a quoted
 * CSV field may span several lines).
 */

/** Labelled texts as read from a file, in file order. */
export interface TextRecords {
  texts: string[];
  /** The label of each text as written in the file (numbers as their decimal string). */
  labels: string[];
  /**
   * The physical line where each record starts (1-based; the CSV header is line 1; CRLF, LF
   * and a lone CR each end a line), for error messages.
   */
  lines: number[];
  /** The content digest of the file's bytes (data/identity.ts). */
  contentDigest: string;
}

/** Which fields hold the text and the label. */
export interface TextColumns {
  /** Column (CSV) or key (JSONL) of the text ["text"]. */
  textColumn?: string;
  /** Column or key of the label ["label"]. */
  labelColumn?: string;
}

/** How to read a text file: its columns / keys and its encoding. */
export interface TextFileOptions extends TextColumns {
  /**
   * Character encoding of the file ["auto": UTF-16LE / UTF-16BE after an FF FE / FE FF
   * byte-order mark, else UTF-8 (a UTF-8 byte-order mark is dropped), or Windows-1252 when the
   * bytes are not valid UTF-8; bytes that are a quarter or more NULs without a byte-order mark
   * are an error suggesting --encoding utf-16le or utf-16be]. Any label iconv-lite or the WHATWG
   * Encoding Standard knows: "utf-8" (then invalid UTF-8 is an error naming its line),
   * "windows-1252" (also for "latin1" / "iso-8859-1" / "us-ascii"), "iso-8859-15",
   * "utf-16le", "shift_jis", "gb18030", ...
   */
  encoding?: string;
}

/**
 * Reads a text file as a string in `encoding` (see {@link TextFileOptions.encoding}), with the
 * content digest of its bytes.
 *
 * @throws InputError naming the file when it cannot be read, the encoding is unknown, the
 *   encoding is auto and the bytes look like UTF-16 without a byte-order mark, or the encoding
 *   is utf-8 and a line is not valid UTF-8.
 */
function readText(file: string, encoding: string = AUTO_ENCODING): { text: string; contentDigest: string } {
  let key: string;
  try {
    key = checkEncoding(encoding);
  } catch (e) {
    throw new InputError(`encoding: ${(e as Error).message}`);
  }
  let bytes: Buffer;
  try {
    bytes = readFileSync(file);
  } catch (e) {
    throw new InputError(
      `${file}: cannot read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`,
    );
  }
  const contentDigest = new ContentHasher().add(bytes).digest();
  if (key === AUTO_ENCODING) {
    const utf16 = utf16Guess(bytes);
    if (utf16 !== null)
      throw new InputError(
        `${file}: ${bytes.filter((b) => b === 0).length} of its ${bytes.length} bytes are NUL: UTF-16 text without a byte-order mark? give its encoding, e.g. --encoding ${utf16}`,
      );
    return { text: decodeBytes(bytes), contentDigest };
  }
  const charset = resolveCharset(key)!;
  if (charset.name === "utf-8" && !isUtf8(bytes)) {
    let line = 1;
    for (let start = 0; start < bytes.length; line++) {
      const nl = bytes.indexOf(0x0a, start);
      const end = nl < 0 ? bytes.length : nl;
      if (!isUtf8(bytes.subarray(start, end)))
        throw new InputError(
          `${file}: line ${line}: not valid UTF-8 (--encoding ${encoding}); give the file's encoding, e.g. --encoding windows-1252, or --encoding auto`,
        );
      start = end + 1;
    }
  }
  return { text: charset.decode(bytes), contentDigest };
}

/**
 * The header row of a CSV file (BOM and CR line ends handled).
 *
 * @param options.encoding the file's encoding ["auto"].
 * @throws InputError when the file cannot be read or parsed, or has no header row.
 * @example csvColumns("mail.csv") // ["text", "label"]
 */
export function csvColumns(
  file: string,
  options: Pick<TextFileOptions, "encoding"> = {},
): string[] {
  const rows = parseCsv(file, readText(file, options.encoding).text);
  if (rows.length === 0)
    throw new InputError(`${file}: the CSV file is empty (expected a header row)`);
  return rows[0].fields;
}

/** One CSV record and the physical line where it starts. */
interface CsvRow {
  fields: string[];
  line: number;
}

/**
 * Physical start lines (1-based) of records that end at the given UTF-8 byte offsets (csv-parse's
 * info.bytes, counted from the start of the text, BOM included): a record starts where the
 * previous one ended, after the empty lines csv-parse skipped.
 *
 * Why not csv-parse's info.lines: it is the line where a record ENDS, and it counts a CRLF
 * inside a quoted field as two lines, so every later record would be reported one line late.
 */
function startLines(text: string, ends: readonly number[]): number[] {
  const bytes = Buffer.from(text, "utf8");
  const lines: number[] = [];
  let pos = 0;
  let line = 1;
  const advance = (to: number) => {
    for (; pos < to && pos < bytes.length; pos++) {
      const b = bytes[pos];
      if (b === 0x0a || (b === 0x0d && bytes[pos + 1] !== 0x0a)) line++;
    }
  };
  let start = 0;
  for (const end of ends) {
    // Skip the empty lines before the record.
    while (start < bytes.length && (bytes[start] === 0x0a || bytes[start] === 0x0d)) start++;
    advance(start);
    lines.push(line);
    start = end;
  }
  return lines;
}

function parseCsv(file: string, text: string): CsvRow[] {
  let records: { record: string[]; info: { bytes: number } }[];
  // Where the last good record ended: the record csv-parse fails on starts after it.
  let lastEnd = 0;
  try {
    records = parse(text, {
      bom: true,
      skip_empty_lines: true,
      relax_column_count: true,
      trim: false,
      info: true,
      on_record: (record: string[], context: { bytes: number }) => {
        lastEnd = context.bytes;
        return record;
      },
    }) as unknown as { record: string[]; info: { bytes: number } }[];
  } catch (e) {
    // csv-parse's own "at line N" is left out: it counts lines its own way (see startLines).
    const line = startLines(text, [lastEnd, lastEnd])[1];
    throw new InputError(
      `${file}: line ${line}: not valid CSV (${(e as Error).message.replace(/ at line \d+/, "")})`,
    );
  }
  const lines = startLines(
    text,
    records.map((r) => r.info.bytes),
  );
  return records.map((r, i) => ({ fields: r.record, line: lines[i] }));
}

/**
 * Reads a CSV file with a header row: the text of each row from `textColumn`, its label from
 * `labelColumn`. A UTF-8 BOM and CRLF line ends are handled; empty lines are skipped; an empty
 * text cell is an empty text; a quoted field may span several lines.
 *
 * @param options columns ["text", "label"] and encoding ["auto"].
 * @returns texts, labels, the line where each record starts and the file's content digest.
 * @throws InputError naming the file when it cannot be read, decoded or parsed (naming the
 *   line where the bad record starts), a column is missing (naming the column and the columns
 *   found), a row is too short for a column, or a label cell is empty (naming its line).
 * @example readCsvTexts("mail.csv", { textColumn: "body", encoding: "windows-1252" }).texts
 */
export function readCsvTexts(file: string, options: TextFileOptions = {}): TextRecords {
  const textColumn = options.textColumn ?? "text";
  const labelColumn = options.labelColumn ?? "label";
  const { text, contentDigest } = readText(file, options.encoding);
  const rows = parseCsv(file, text);
  if (rows.length === 0)
    throw new InputError(`${file}: the CSV file is empty (expected a header row)`);
  const header = rows[0].fields.map((h) => h.trim());
  const find = (name: string, flag: string) => {
    const i = header.indexOf(name);
    if (i < 0)
      throw new InputError(
        `${file}: no column "${name}" (${flag}); the columns are ${header.map((h) => preview(h, 40)).join(", ")}`,
      );
    // A column named twice is ambiguous (which one is the text?): refuse it, as JSON keys.
    const again = header.indexOf(name, i + 1);
    if (again >= 0)
      throw new InputError(
        `${file}: line 1: the header names column ${preview(name, 40)} twice (columns ${i + 1} and ${again + 1}); rename one (${flag})`,
      );
    return i;
  };
  const ti = find(textColumn, "--text-column");
  const li = find(labelColumn, "--label-column");
  const out: TextRecords = { texts: [], labels: [], lines: [], contentDigest };
  for (let r = 1; r < rows.length; r++) {
    const { fields: row, line } = rows[r];
    if (row.length <= Math.max(ti, li))
      throw new InputError(
        `${file}: line ${line}: record ${r} has ${row.length} field${row.length === 1 ? "" : "s"}, column "${row.length <= ti ? textColumn : labelColumn}" is missing`,
      );
    const label = row[li].trim();
    if (label === "")
      throw new InputError(
        `${file}: line ${line}: record ${r} has an empty label in column "${labelColumn}"`,
      );
    out.texts.push(row[ti]);
    out.labels.push(label);
    out.lines.push(line);
  }
  return out;
}

/**
 * Reads a JSONL file: one JSON object per non-blank line (blank lines, also at the end, are
 * skipped), its text under `textColumn` (a string; null is an empty text) and its label under
 * `labelColumn` (a string or a number).
 *
 * @param options keys ["text", "label"] and encoding ["auto"].
 * @returns texts, labels, the line of each record and the file's content digest.
 * @throws InputError naming the file and the 1-based line number when a non-blank line is not
 *   valid JSON or not an object, lacks the text or label key, or has a value of the wrong type;
 *   naming the file when it cannot be read or decoded.
 * @example readJsonlTexts("mail.jsonl", { labelColumn: "class" }).labels
 */
export function readJsonlTexts(file: string, options: TextFileOptions = {}): TextRecords {
  const textColumn = options.textColumn ?? "text";
  const labelColumn = options.labelColumn ?? "label";
  const { text, contentDigest } = readText(file, options.encoding);
  const lines = text.split(/\r?\n/);
  const out: TextRecords = { texts: [], labels: [], lines: [], contentDigest };
  lines.forEach((line, i) => {
    if (line.trim() === "") return;
    const where = `${file}: line ${i + 1}`;
    let value: unknown;
    try {
      value = parseJsonStrict(line); // a key written twice is refused, not "last one wins"
    } catch (e) {
      if (e instanceof DuplicateKeyError)
        throw new InputError(
          `${where}: the key ${JSON.stringify(e.key)} appears twice in one object (columns ${e.firstColumn} and ${e.column}); a JSON object must not repeat a key`,
        );
      throw new InputError(`${where}: not valid JSON (${(e as Error).message})`);
    }
    if (value === null || typeof value !== "object" || Array.isArray(value))
      throw new InputError(
        `${where}: expected a JSON object, got ${Array.isArray(value) ? "an array" : preview(value)}`,
      );
    const record = value as Record<string, unknown>;
    if (!(textColumn in record))
      throw new InputError(`${where}: no key "${textColumn}" (--text-column)`);
    if (!(labelColumn in record))
      throw new InputError(`${where}: no key "${labelColumn}" (--label-column)`);
    const text = record[textColumn];
    const label = record[labelColumn];
    if (text !== null && typeof text !== "string")
      throw new InputError(`${where}: "${textColumn}" must be a string, got ${preview(text)}`);
    if (
      !(typeof label === "string" && label.trim() !== "") &&
      !(typeof label === "number" && Number.isFinite(label))
    )
      throw new InputError(
        `${where}: "${labelColumn}" must be a non-empty string or a number, got ${preview(label)}`,
      );
    out.texts.push(text ?? "");
    out.labels.push(String(label).trim());
    out.lines.push(i + 1);
  });
  return out;
}

/**
 * Maps labels to class ids. Without `names`, the distinct labels in sorted order (numbers in
 * numeric order when every label is a number, else code-point order) become ids 0..k-1.
 * With `names` (e.g. a checkpoint's classes), each label must be one of them.
 *
 * @returns {ids: Int32Array, names} (names[i] is the label of class i).
 * @throws InputError naming the file, the line and the label when a label is not in `names`,
 *   when the file has no records, or (without `names`) when it has only one class.
 */
export function labelIds(
  records: Omit<TextRecords, "contentDigest">,
  file: string,
  names?: readonly string[],
): { ids: Int32Array; names: string[] } {
  if (records.labels.length === 0) throw new InputError(`${file}: no records`);
  let classes: string[];
  if (names === undefined) {
    const distinct = [...new Set(records.labels)];
    const numeric = distinct.every((l) => /^[+-]?\d+(\.\d+)?$/.test(l));
    classes = numeric
      ? distinct.sort((a, b) => Number(a) - Number(b))
      : distinct.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    if (classes.length < 2)
      throw new InputError(
        `${file}: the label column has only one class (${preview(classes[0])}); a classifier needs at least two`,
      );
  } else classes = [...names];
  const index = new Map(classes.map((c, i) => [c, i]));
  const ids = new Int32Array(records.labels.length);
  records.labels.forEach((l, i) => {
    const id = index.get(l);
    if (id === undefined)
      throw new InputError(
        `${file}: line ${records.lines[i]}: unknown label ${preview(l)} (the classes are ${classes.map((c) => preview(c, 40)).join(", ")})`,
      );
    ids[i] = id;
  });
  return { ids, names: classes };
}
