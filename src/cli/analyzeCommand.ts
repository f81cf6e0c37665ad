import { specForms } from "../data/sources/index.ts";
import { Command, Option } from "commander";
import { z } from "zod";
import { checkEncoding } from "../data/text/charset.ts";
import { InputError } from "../util/errors.ts";

interface AnalyzeFlags {
  model: string;
  randomInit?: boolean;
  seed: string;
  data?: string;
  textColumn?: string;
  labelColumn?: string;
  encoding?: string;
  n: string;
  out?: string;
  backend: string;
  mlp: string;
  headTruth: boolean;
  blockTruth: boolean;
  iterations: string;
}

const Flags = z.object({
  seed: z.coerce.number().int().min(0, "expected an integer >= 0"),
  n: z.coerce.number().int().min(1, "expected an integer >= 1").max(10000, "expected at most 10000"),
  iterations: z.coerce.number().int().min(1, "expected an integer >= 1").max(10000),
});

function parseFlags(flags: AnalyzeFlags) {
  const result = Flags.safeParse(flags);
  if (!result.success) {
    const issue = result.error.issues[0];
    const flag = String(issue.path[0]);
    throw new InputError(`--${flag}: ${issue.message} (got "${flags[flag as keyof AnalyzeFlags]}")`);
  }
  return result.data;
}

/** Checks --encoding. @throws InputError naming the flag, the value and what is expected. */
function encodingFlag(value: string): string {
  try {
    return checkEncoding(value);
  } catch (e) {
    throw new InputError(`--encoding: ${(e as Error).message}`);
  }
}

/**
 * `attnlip analyze [CHECKPOINT]`: local Lipschitz bounds per layer, head and network at test
 * inputs, beside the true values, written to DIR/analysis.json and DIR/analysis.csv.
 */
export function analyzeCommand(): Command {
  return new Command("analyze")
    .description(
      "local Lipschitz bounds (every variant) per block, head and network at test inputs, beside the true values and the ratios",
    )
    .argument("[checkpoint]", "a checkpoint folder written by `attnlip train` (or use --model with --random-init)")
    .option("--model <preset>", "model preset when no checkpoint is given", "vit-tiny")
    .option("--random-init", "analyze a freshly initialised model (seeded) instead of a checkpoint")
    .option("--seed <int>", "seed of --random-init and of the power iterations; also of the data split, except for a checkpoint on its own data, which is always analysed on its held-out split", "0")
    .option(
      "--data <spec>",
      `${specForms()}; the test split is used [a checkpoint: its own data and held-out split; else mnist, spam for text models]`,
    )
    .option("--text-column <name>", "text data files: the column / key of the text [the checkpoint's, else text]")
    .option("--label-column <name>", "text data files: the column / key of the label [the checkpoint's, else label]")
    .option(
      "--encoding <name>",
      "text data files: the character encoding, e.g. utf-8, windows-1252 [the checkpoint's, else auto: UTF-8, else Windows-1252]",
    )
    .option("--n <int>", "number of test inputs", "16")
    .option("--out <dir>", "write analysis.json and analysis.csv here")
    .addOption(new Option("--backend <name>", "tfjs backend").choices(["wasm", "cpu"]).default("wasm"))
    .addOption(
      new Option("--mlp <mode>", "MLP factor inside block bounds: local (exact at the point) or relaxed")
        .choices(["local", "relaxed"])
        .default("local"),
    )
    .option("--no-head-truth", "skip the per-head true values (power iteration per head)")
    .option("--no-block-truth", "skip the per-block true values (power iteration per block)")
    .option(
      "--iterations <int>",
      "cap on the products with Df^T Df per block and head true value (Lanczos); each stops earlier once its residual test holds, and one that reaches the cap is flagged unconverged",
      "1000",
    )
    .action(async (checkpoint: string | undefined, flags: AnalyzeFlags) => {
      const opts = parseFlags(flags);
      if (checkpoint === undefined && !flags.randomInit)
        throw new InputError("analyze: give a checkpoint folder, or --random-init with --model");
      if (checkpoint !== undefined && flags.randomInit)
        throw new InputError("analyze: give either a checkpoint folder or --random-init, not both");
      // Heavy modules load only when the command runs, so `attnlip sigma` stays fast.
      const { runAnalyze } = await import("./analyzeRun.ts");
      await runAnalyze({
        checkpoint,
        model: flags.model,
        seed: opts.seed,
        data: flags.data,
        textColumn: flags.textColumn,
        labelColumn: flags.labelColumn,
        encoding: flags.encoding === undefined ? undefined : encodingFlag(flags.encoding),
        n: opts.n,
        out: flags.out,
        backend: flags.backend as "wasm" | "cpu",
        mlp: flags.mlp as "local" | "relaxed",
        headTruth: flags.headTruth,
        blockTruth: flags.blockTruth,
        iterations: opts.iterations,
      });
    });
}
