import { Command } from "commander";
import { readFile } from "node:fs/promises";
import { extname } from "node:path";
import { parse as parseCsv } from "csv-parse/sync";
import {
  InputError,
  parseNumber,
  parseNumberList,
  parseProbabilityRow,
  ROW_BOUNDS,
  rowReport,
  softmaxRow,
  type RowReport,
} from "../softmax/index.ts";
import { DuplicateKeyError, parseJsonStrict } from "../io/strictJson.ts";
import { summarize } from "../stats.ts";
import { renderTable } from "../util/table.ts";

interface SigmaOptions {
  logits?: string;
  file?: string;
  normalize?: boolean;
  json?: boolean;
}

/** `attnlip sigma`: the softmax-Jacobian spectral norm of rows, beside its bounds. */
export function sigmaCommand(): Command {
  return new Command("sigma")
    .description(
      "sigma(p) = ||diag(p) - p p^T||_2 of attention rows, exact and closed-form, with classical bounds and their ratios to sigma",
    )
    .argument("[row]", "probabilities, comma-separated, e.g. 0.5,0.3,0.2")
    .option("--logits <row>", "logits, comma-separated; a numerically stable softmax is applied first")
    .option(
      "--file <path>",
      "many rows: .csv (one row per line, no header; # starts a comment) or .json (an array of arrays)",
    )
    .option("--normalize", "divide rows by their sum instead of rejecting sums off from 1 by more than 1e-6")
    .option("--json", "machine-readable output")
    // Negative entries look like options to commander; they are taken as the row and
    // rejected by the row validator with a message that says what is wrong. So unknown options
    // and extra arguments reach the action, which names them (commander would count an unknown
    // option as a second argument: "too many arguments").
    .allowUnknownOption()
    .allowExcessArguments()
    .action(async (row: string | undefined, options: SigmaOptions, command: Command) => {
      try {
        await sigmaAction(row, options, command);
      } catch (e) {
        // One prefix for every bad input, as the other commands print theirs.
        if (e instanceof InputError && !e.message.startsWith("sigma:")) throw new InputError(`sigma: ${e.message}`);
        throw e;
      }
    });
}

/** The sigma command's work: one row, --logits or --file. */
async function sigmaAction(row: string | undefined, options: SigmaOptions, command: Command): Promise<void> {
  const unknown = command.args.find((a) => /^--?[a-zA-Z]/.test(a));
  if (unknown !== undefined) throw new InputError(`sigma: unknown option '${unknown}'`);
  const extra = command.args.filter((a) => a !== row);
  if (extra.length > 0) throw new InputError(`sigma: unexpected argument '${extra[0]}' (give one row)`);
  const sources = [row !== undefined, options.logits !== undefined, options.file !== undefined].filter(Boolean).length;
  if (sources !== 1) throw new InputError("sigma: give exactly one of a row, --logits <row> or --file <path>");
  if (options.file !== undefined) {
    const rows = await readRows(options.file, options.normalize ?? false);
    printMany(rows.map(rowReport), options.json ?? false);
    return;
  }
  const p =
    options.logits !== undefined
      ? softmaxRow(parseNumberList(options.logits, "--logits"), "--logits")
      : parseProbabilityRow(parseNumberList(row as string, "row"), { normalize: options.normalize, name: "row" });
  printOne(rowReport(p), options.json ?? false);
}

function printOne(report: RowReport, json: boolean): void {
  if (json) {
    console.log(JSON.stringify(report));
    return;
  }
  const ratio = (v: number) => (report.sigma > 0 ? v / report.sigma : NaN);
  const rows: (string | number)[][] = [["sigma (exact)", report.sigma, ratio(report.sigma)]];
  for (const name of ROW_BOUNDS) rows.push([name, report[name], ratio(report[name])]);
  console.log(`row of n = ${report.n} probabilities`);
  console.log(renderTable(["quantity", "value", "ratio to sigma"], rows));
  if (report.sigma === 0) console.log("sigma is 0 (one-hot or single entry): ratios are undefined.");
}

function printMany(reports: RowReport[], json: boolean): void {
  const names = ["sigma", ...ROW_BOUNDS] as const;
  const positive = reports.filter((r) => r.sigma > 0);
  const summary = Object.fromEntries(
    names.map((name) => {
      const values = summarize(reports.map((r) => r[name]), name);
      const ratios = positive.length > 0 ? summarize(positive.map((r) => r[name] / r.sigma), `${name} ratio`) : null;
      return [name, { ...values, ratio: ratios }];
    }),
  );
  if (json) {
    console.log(JSON.stringify({ rows: reports.length, rowsWithPositiveSigma: positive.length, summary, perRow: reports }));
    return;
  }
  console.log(`${reports.length} rows (${positive.length} with sigma > 0; ratios over those)`);
  console.log(
    renderTable(
      ["quantity", "mean", "median", "max", "median ratio", "max ratio"],
      names.map((name) => {
        const s = summary[name];
        return [name, s.mean, s.median, s.max, s.ratio?.median ?? NaN, s.ratio?.max ?? NaN];
      }),
    ),
  );
}

/** Reads probability rows from a .csv (one row per line) or .json (array of arrays) file. */
async function readRows(path: string, normalize: boolean): Promise<Float64Array[]> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const why = code === "ENOENT" ? "no such file" : (code ?? (error as Error).message);
    throw new InputError(`--file: cannot read ${path} (${why})`);
  }
  const ext = extname(path).toLowerCase();
  let raw: unknown[][];
  if (ext === ".json") {
    let parsed: unknown;
    try {
      parsed = parseJsonStrict(text.replace(/^\ufeff/, ""));
    } catch (error) {
      if (error instanceof DuplicateKeyError) throw new InputError(`--file: ${path}: ${error.message}`);
      throw new InputError(`--file: ${path} is not valid JSON (${(error as Error).message})`);
    }
    if (!Array.isArray(parsed) || !parsed.every(Array.isArray))
      throw new InputError(`--file: ${path} must hold a JSON array of arrays of probabilities`);
    raw = parsed as unknown[][];
  } else if (ext === ".csv" || ext === ".txt") {
    try {
      raw = parseCsv(text, {
        bom: true,
        skip_empty_lines: true,
        trim: true,
        comment: "#",
        relax_column_count: true,
        record_delimiter: ["\r\n", "\n", "\r"],
      }) as string[][];
    } catch (error) {
      throw new InputError(`--file: ${path} is not valid CSV (${(error as Error).message})`);
    }
  } else {
    throw new InputError(`--file: expected a .csv or .json file, got "${path}"`);
  }
  if (raw.length === 0) throw new InputError(`--file: ${path} holds no rows`);
  return raw.map((fields, i) => {
    const name = `--file row ${i + 1}`;
    const numbers = fields.map((f, j) => {
      // JSON rows hold numbers; CSV fields are strings parsed strictly.
      if (typeof f === "number") return f;
      if (typeof f === "string" && ext !== ".json") {
        if (f.length === 0) throw new InputError(`${name}: field ${j + 1} is empty`);
        return parseNumber(f, `${name}: field ${j + 1}`);
      }
      throw new InputError(`${name}: field ${j + 1}: must be a number, got ${JSON.stringify(f)}`);
    });
    return parseProbabilityRow(numbers, { normalize, name });
  });
}
