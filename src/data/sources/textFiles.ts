import { InputError } from "../../util/errors.ts";
import type { TextLoadOptions, TextSource, TextSourceData } from "../registry.ts";
import { AUTO_ENCODING } from "../text/charset.ts";
import { labelIds, readCsvTexts, readJsonlTexts, type TextRecords } from "../text/files.ts";

/** Reads a CSV or JSONL file's records and maps their labels to class ids (sorted names). */
function fileRecords(file: string, options: TextLoadOptions, read: typeof readCsvTexts): TextSourceData {
  const textColumn = options.textColumn ?? "text";
  const labelColumn = options.labelColumn ?? "label";
  if (textColumn === labelColumn)
    throw new InputError(
      `${file}: --text-column and --label-column both name "${textColumn}"; the model would read its own label`,
    );
  const encoding = options.encoding?.trim().toLowerCase() ?? AUTO_ENCODING;
  const records: TextRecords = read(file, { textColumn, labelColumn, encoding });
  const mapped = labelIds(records, file, options.labelNames);
  return {
    texts: records.texts,
    labels: mapped.ids,
    labelNames: mapped.names,
    textColumn,
    labelColumn,
    encoding,
    contentDigest: records.contentDigest,
    lines: records.lines,
  };
}

/** A CSV file with a header row: text and label columns (data/text/files.ts). */
export const csvSource: TextSource = {
  name: "csv",
  arg: "FILE",
  task: "text",
  summary: "a CSV file with text and label columns",
  async load(file, options) {
    return fileRecords(file!, options, readCsvTexts);
  },
};

/** A JSONL file: one JSON object per line with text and label keys (data/text/files.ts). */
export const jsonlSource: TextSource = {
  name: "jsonl",
  arg: "FILE",
  task: "text",
  summary: "one JSON object per line",
  async load(file, options) {
    return fileRecords(file!, options, readJsonlTexts);
  },
};
