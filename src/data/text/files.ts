import { readFileSync } from "node:fs";
import { parse } from "csv-parse/sync";
import { InputError } from "../../softmax/parse.ts";
import { decodeBytes } from "./decode.ts";

/**
 * User text data: CSV (a header row naming the columns) and JSONL (one JSON object per line)
 * files, read as bytes and decoded robustly (UTF-8 with or without BOM, else Windows-1252).
 */

/** Labelled texts as read from a file, in file order. */
export interface TextRecords {
  texts: string[];
  /** The label of each text as written in the file (numbers as their decimal string). */
  labels: string[];
  /**
   * Where each record starts (1-based line of the file: CSV counts the header as line 1;
   * for error messages).
   */
  lines: number[];
}

/** Which fields hold the text and the label. */
export interface TextColumns {
  /** Column (CSV) or key (JSONL) of the text ["text"]. */
  textColumn?: string;
  /** Column or key of the label ["label"]. */
  labelColumn?: string;
}

function readText(file: string): string {
  let bytes: Buffer;
  try {
    bytes = readFileSync(file);
  } catch (e) {
    throw new InputError(
      `${file}: cannot read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`,
    );
  }
  return decodeBytes(bytes);
}

/**
 * The header row of a CSV file (BOM and CR line ends handled).
 *
 * @throws InputError when the file cannot be read or parsed, or has no header row.
 */
export function csvColumns(file: string): string[] {
  const rows = parseCsv(file, readText(file));
  if (rows.length === 0)
    throw new InputError(`${file}: the CSV file is empty (expected a header row)`);
  return rows[0];
}

function parseCsv(file: string, text: string): string[][] {
  try {
    return parse(text, {
      bom: true,
      skip_empty_lines: true,
      relax_column_count: true,
      trim: false,
    }) as string[][];
  } catch (e) {
    throw new InputError(`${file}: not valid CSV (${(e as Error).message})`);
  }
}

/**
 * Reads a CSV file with a header row: the text of each row from `textColumn`, its label from
 * `labelColumn`. A UTF-8 BOM and CRLF line ends are handled; empty lines are skipped; an empty
 * text cell is an empty text.
 *
 * @throws InputError naming the file when it cannot be read or parsed, a column is missing
 *   (naming the column and the columns found), a row is too short for a column, or a label
 *   cell is empty (naming its line).
 */
export function readCsvTexts(file: string, columns: TextColumns = {}): TextRecords {
  const textColumn = columns.textColumn ?? "text";
  const labelColumn = columns.labelColumn ?? "label";
  const rows = parseCsv(file, readText(file));
  if (rows.length === 0)
    throw new InputError(`${file}: the CSV file is empty (expected a header row)`);
  const header = rows[0].map((h) => h.trim());
  const find = (name: string, flag: string) => {
    const i = header.indexOf(name);
    if (i < 0)
      throw new InputError(
        `${file}: no column "${name}" (${flag}); the columns are ${header.map((h) => JSON.stringify(h)).join(", ")}`,
      );
    return i;
  };
  const ti = find(textColumn, "--text-column");
  const li = find(labelColumn, "--label-column");
  const out: TextRecords = { texts: [], labels: [], lines: [] };
  for (let r = 1; r < rows.length; r++) {
    const row = rows[r];
    const line = r + 1;
    if (row.length <= Math.max(ti, li))
      throw new InputError(
        `${file}: record ${r} (data row ${line}) has ${row.length} fields, column "${row.length <= ti ? textColumn : labelColumn}" is missing`,
      );
    const label = row[li].trim();
    if (label === "")
      throw new InputError(
        `${file}: record ${r} (data row ${line}) has an empty label in column "${labelColumn}"`,
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
 * @throws InputError naming the file and the 1-based line number when a non-blank line is not
 *   valid JSON or not an object, lacks the text or label key, or has a value of the wrong type.
 */
export function readJsonlTexts(file: string, columns: TextColumns = {}): TextRecords {
  const textColumn = columns.textColumn ?? "text";
  const labelColumn = columns.labelColumn ?? "label";
  const lines = readText(file).split(/\r?\n/);
  const out: TextRecords = { texts: [], labels: [], lines: [] };
  lines.forEach((line, i) => {
    if (line.trim() === "") return;
    const where = `${file}: line ${i + 1}`;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch (e) {
      throw new InputError(`${where}: not valid JSON (${(e as Error).message})`);
    }
    if (value === null || typeof value !== "object" || Array.isArray(value))
      throw new InputError(
        `${where}: expected a JSON object, got ${Array.isArray(value) ? "an array" : JSON.stringify(value)}`,
      );
    const record = value as Record<string, unknown>;
    if (!(textColumn in record))
      throw new InputError(`${where}: no key "${textColumn}" (--text-column)`);
    if (!(labelColumn in record))
      throw new InputError(`${where}: no key "${labelColumn}" (--label-column)`);
    const text = record[textColumn];
    const label = record[labelColumn];
    if (text !== null && typeof text !== "string")
      throw new InputError(
        `${where}: "${textColumn}" must be a string, got ${JSON.stringify(text)}`,
      );
    if (
      !(typeof label === "string" && label.trim() !== "") &&
      !(typeof label === "number" && Number.isFinite(label))
    )
      throw new InputError(
        `${where}: "${labelColumn}" must be a non-empty string or a number, got ${JSON.stringify(label)}`,
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
  records: TextRecords,
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
        `${file}: the label column has only one class (${JSON.stringify(classes[0])}); a classifier needs at least two`,
      );
  } else classes = [...names];
  const index = new Map(classes.map((c, i) => [c, i]));
  const ids = new Int32Array(records.labels.length);
  records.labels.forEach((l, i) => {
    const id = index.get(l);
    if (id === undefined)
      throw new InputError(
        `${file}: line ${records.lines[i]}: unknown label ${JSON.stringify(l)} (the classes are ${classes.map((c) => JSON.stringify(c)).join(", ")})`,
      );
    ids[i] = id;
  });
  return { ids, names: classes };
}
