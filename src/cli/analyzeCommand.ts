import { specForms } from "../data/sources/index.ts";
import { Command, Option } from "commander";
import { checkEncoding } from "../data/text/charset.ts";
import { checkpointArgumentHelp, optionWithDefault, resolveWorkers } from "./flags.ts";
import { InputError } from "../util/errors.ts";
import { checkVariants, variantNames, type HeadVariant } from "../lipschitz/rules/index.ts";
import { parseNumberFlag, type NumberRule } from "../util/numberFlag.ts";

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
  variants?: string;
  force?: boolean;
  headTruth: boolean;
  blockTruth: boolean;
  iterations: string;
  workers?: string;
}

/** The numeric flags' limits (the words of their errors come from util/numberFlag.ts). */
const RULES = {
  seed: { integer: true, min: 0, max: 0xffffffff },
  n: { integer: true, min: 1, max: 10000 },
  iterations: { integer: true, min: 1, max: 10000 },
  workers: { integer: true, min: 1, max: 256 },
} satisfies Record<string, NumberRule>;

/**
 * The analyze command's numeric flags as numbers.
 *
 * @throws InputError `analyze: --n: must be an integer from 1 to 10000, got "abc"` (the one
 *   wording of every command's numeric flags).
 */
export function parseAnalyzeNumbers(flags: Pick<AnalyzeFlags, "seed" | "n" | "iterations" | "workers">): {
  seed: number;
  n: number;
  iterations: number;
  workers: number | undefined;
} {
  return {
    seed: parseNumberFlag(flags.seed, "--seed", RULES.seed, "analyze"),
    n: parseNumberFlag(flags.n, "--n", RULES.n, "analyze"),
    iterations: parseNumberFlag(flags.iterations, "--iterations", RULES.iterations, "analyze"),
    workers: flags.workers === undefined ? undefined : parseNumberFlag(flags.workers, "--workers", RULES.workers, "analyze"),
  };
}

/**
 * The --variants list: known head variants, separated by commas, each once.
 *
 * @throws InputError `analyze: --variants: unknown variant "x" (known: paper, ...)`.
 * @example variantsFlag("t3-exact,paper") // ["paper", "t3-exact"]
 */
export function variantsFlag(value: string): HeadVariant[] {
  const items = value.split(",").map((v) => v.trim());
  // An empty item (a stray comma) is refused, as --eps and --attack refuse one.
  if (items.some((v) => v === ""))
    throw new InputError(`analyze: --variants: must be variant names separated by commas, got ${JSON.stringify(value)}`);
  try {
    return checkVariants(items, "analyze");
  } catch (e) {
    throw new InputError((e as Error).message.replace(/^analyze: variants:/, "analyze: --variants:"));
  }
}

/** Checks --encoding. @throws InputError naming the flag, the value and what is expected. */
function encodingFlag(value: string): string {
  try {
    return checkEncoding(value);
  } catch (e) {
    throw new InputError(`analyze: --encoding: ${(e as Error).message}`);
  }
}

/**
 * `attnlip analyze [CHECKPOINT]`: local Lipschitz bounds per layer, head and network at test
 * inputs, beside the true values, written to analysis.json and analysis.csv in --out DIR, else
 * in the checkpoint folder (as `attack` writes CHECKPOINT/attack.json); a random-init model
 * without --out writes nothing.
 */
export function analyzeCommand(): Command {
  return new Command("analyze")
    .description(
      "local Lipschitz bounds (every variant) per block, head and network at test inputs, beside the true values and the ratios",
    )
    .argument("[checkpoint]", checkpointArgumentHelp())
    .option("--model <preset|json>", "model preset or JSON config (as train takes it) with --random-init", "vit-tiny")
    .option("--random-init", "analyze a freshly initialised model (seeded) instead of a checkpoint")
    .option("--seed <int>", "seed of --random-init and of the power iterations; also of the data split, except for a checkpoint on its own data, which is always analysed on its held-out split", "0")
    .addOption(optionWithDefault("--data <spec>", `${specForms()}; the test split is used`, "a checkpoint: its own data and held-out split; else mnist, spam for text models"))
    .addOption(optionWithDefault("--text-column <name>", "text data files: the column / key of the text", "the checkpoint's, else text"))
    .addOption(optionWithDefault("--label-column <name>", "text data files: the column / key of the label", "the checkpoint's, else label"))
    .addOption(optionWithDefault("--encoding <name>", "text data files: the character encoding, e.g. utf-8, windows-1252", "the checkpoint's, else auto: UTF-16 after its byte-order mark, else UTF-8, else Windows-1252"))
    .option("--n <int>", "number of test inputs", "16")
    .option("--force", "replace an existing analysis.json and analysis.csv (without it, an earlier result is never overwritten)")
    .addOption(optionWithDefault("--out <dir>", "write analysis.json and analysis.csv here", "the checkpoint folder; none with --random-init"))
    .addOption(new Option("--backend <name>", "tfjs backend: wasm or cpu").choices(["wasm", "cpu"]).default("wasm"))
    .addOption(
      new Option("--mlp <mode>", "MLP factor inside block bounds: local (exact at the point) or relaxed")
        .choices(["local", "relaxed"])
        .default("local"),
    )
    .addOption(optionWithDefault("--variants <list>", `bound variants to compute, separated by commas, from ${variantNames().join(", ")}; leaving out cov and fused skips their exact query paths, the costly part on long sequences (l2-cov likewise for L2 attention); l2-dist, l2-cov (local) and kim (Kim et al.'s global bound) are for L2-attention models only`, "all that apply: the l2 variants and kim only with L2 attention"))
    .option("--no-head-truth", "skip the per-head true values (power iteration per head)")
    .option("--no-block-truth", "skip the per-block true values (power iteration per block)")
    .option(
      "--iterations <int>",
      "cap on the products with Df^T Df per block and head true value (Lanczos); each stops earlier once its residual test holds, and one that reaches the cap is flagged unconverged",
      "1000",
    )
    .addOption(optionWithDefault("--workers <int>", "worker threads, each analysing slices of at least 4 inputs with its own model copy (1: no workers; the results are the same)", "the number of cores"))
    .action(async (checkpoint: string | undefined, flags: AnalyzeFlags) => {
      const opts = parseAnalyzeNumbers(flags);
      const workers = resolveWorkers(opts.workers, "analyze"); // now: a bad ATTNLIP_WORKERS stops the run before anything loads
      if (checkpoint === undefined && !flags.randomInit)
        throw new InputError("analyze: give a checkpoint folder, or --random-init with --model");
      if (checkpoint !== undefined && flags.randomInit)
        throw new InputError("analyze: give either a checkpoint folder or --random-init, not both");
      // Heavy modules load only when the command runs, so `attnlip sigma` stays fast.
      const variants = flags.variants === undefined ? undefined : variantsFlag(flags.variants); // before anything heavy loads
      const { runAnalyze } = await import("../pipelines/analyzeRun.ts");
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
        force: flags.force === true,
        ...(variants === undefined ? {} : { variants }),
        headTruth: flags.headTruth,
        blockTruth: flags.blockTruth,
        iterations: opts.iterations,
        workers,
      });
    });
}
