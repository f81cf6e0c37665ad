import { Command, Option } from "commander";
import { specForms } from "../data/sources/index.ts";
import { InputError } from "../util/errors.ts";
import {
  numberProblem,
  flagError,
  parseNumberFlag,
  readNumber,
  type NumberRule,
} from "../util/numberFlag.ts";
import { variantNames } from "../lipschitz/variants/index.ts";
import { variantsFlag } from "./analyzeCommand.ts";
import { optionWithDefault } from "./flags.ts";

interface RadiusFlags {
  model: string;
  randomInit?: boolean;
  seed: string;
  data?: string;
  n: string;
  block: string;
  radii?: string;
  lengths?: string;
  lengthRadius: string;
  variants?: string;
  constructed: boolean;
  denseLimit: string;
  iterations: string;
  out?: string;
  force?: boolean;
  backend: string;
}

/** The numeric flags' limits. */
const RULES = {
  seed: { integer: true, min: 0, max: 0xffffffff },
  n: { integer: true, min: 1, max: 1000 },
  block: { integer: true, min: 0, max: 1000 },
  radius: { above: 0, max: 1e6 },
  length: { integer: true, min: 1, max: 100000 },
  denseLimit: { integer: true, min: 0, max: 2048 },
  iterations: { integer: true, min: 1, max: 10000 },
} satisfies Record<string, NumberRule>;

/**
 * A list flag of numbers separated by commas.
 *
 * @throws InputError `radius: FLAG: must be a comma-separated list of WHAT, got "TEXT"`.
 * @example numberList("0.1,1,10", "--radii", { above: 0 }) // [0.1, 1, 10]
 */
export function numberList(text: string, flag: string, rule: NumberRule): number[] {
  const fields = text.split(",");
  const values = fields.map((f) => readNumber(f, rule));
  if (values.some((v) => v === null))
    throw flagError("radius", flag, numberProblem(fields, rule, true), text);
  return [...new Set(values as number[])].sort((a, b) => a - b);
}

/**
 * `attnlip radius [CHECKPOINT]`: one block's attention sub-layer at held-out inputs scaled to
 * each radius R and at Castin-style constructed inputs, and at token subsets of n tokens: the
 * true local Lipschitz constant beside every bound variant. Writes radius.json, radius.csv and
 * radius.html to --out DIR.
 */
export function radiusCommand(): Command {
  return new Command("radius")
    .description(
      "local Lipschitz constant of one attention sub-layer against the input radius R and the sequence length n: true value and every bound variant, at held-out and constructed inputs",
    )
    .argument(
      "[checkpoint]",
      "a checkpoint folder written by `attnlip train`, or a Hugging Face folder; or use --model with --random-init",
    )
    .option(
      "--model <preset|json>",
      "model preset or JSON config (as train takes it) with --random-init",
      "vit-tiny",
    )
    .option("--random-init", "a freshly initialised model (seeded) instead of a checkpoint")
    .option(
      "--seed <int>",
      "seed of --random-init, of the data split (except a checkpoint on its own data) and of the Lanczos starts",
      "0",
    )
    .addOption(
      optionWithDefault(
        "--data <spec>",
        `${specForms()}; the test split is used`,
        "a checkpoint: its own data and held-out split; else mnist, spam for text models",
      ),
    )
    .option("--n <int>", "number of held-out inputs", "4")
    .option("--block <int>", "the block whose attention sub-layer is measured", "0")
    .addOption(
      optionWithDefault(
        "--radii <list>",
        "radii R (largest token norm of the tokens entering the sub-layer), separated by commas",
        "13 values, log-spaced from 0.1 to 1000",
      ),
    )
    .addOption(
      optionWithDefault(
        "--lengths <list>",
        "token counts n of the length sweep, separated by commas; each keeps the first token and n - 1 evenly spaced others",
        "2, 4, 8, ... below the full length, and the full length",
      ),
    )
    .option("--length-radius <R>", "the radius R of the length sweep", "10")
    .addOption(
      optionWithDefault(
        "--variants <list>",
        `bound variants, separated by commas, from ${variantNames("dot").join(", ")}`,
        "all",
      ),
    )
    .option(
      "--no-constructed",
      "leave out the constructed inputs (one per head, from the top eigenvector of the symmetric part of W_Q W_K^T)",
    )
    .option(
      "--dense-limit <int>",
      "exact dense Jacobian when n d is at most this, else a Lanczos estimate",
      "400",
    )
    .option("--iterations <int>", "cap on the Lanczos products per true value", "1000")
    .addOption(
      optionWithDefault(
        "--out <dir>",
        "write radius.json, radius.csv and radius.html here",
        "nothing written",
      ),
    )
    .option("--force", "replace an existing radius.json, radius.csv and radius.html")
    .addOption(
      new Option("--backend <name>", "tfjs backend: wasm or cpu")
        .choices(["wasm", "cpu"])
        .default("wasm"),
    )
    .action(radiusAction);
}

/** The command's action: the flags checked and read, then the run (radiusRun.ts). */
async function radiusAction(checkpoint: string | undefined, flags: RadiusFlags): Promise<void> {
  if (checkpoint === undefined && !flags.randomInit)
    throw new InputError("radius: give a checkpoint folder, or --random-init with --model");
  if (checkpoint !== undefined && flags.randomInit)
    throw new InputError("radius: give either a checkpoint folder or --random-init, not both");
  const num = (text: string, flag: string, rule: NumberRule) =>
    parseNumberFlag(text, flag, rule, "radius");
  const variants = flags.variants === undefined ? undefined : variantsOf(flags.variants);
  const run = {
    checkpoint,
    model: flags.model,
    seed: num(flags.seed, "--seed", RULES.seed),
    data: flags.data,
    n: num(flags.n, "--n", RULES.n),
    block: num(flags.block, "--block", RULES.block),
    radii: flags.radii === undefined ? undefined : numberList(flags.radii, "--radii", RULES.radius),
    lengths:
      flags.lengths === undefined
        ? undefined
        : numberList(flags.lengths, "--lengths", RULES.length),
    lengthRadius: num(flags.lengthRadius, "--length-radius", RULES.radius),
    variants,
    constructed: flags.constructed,
    denseLimit: num(flags.denseLimit, "--dense-limit", RULES.denseLimit),
    iterations: num(flags.iterations, "--iterations", RULES.iterations),
    out: flags.out,
    force: flags.force === true,
    backend: flags.backend as "wasm" | "cpu",
  };
  const { runRadius } = await import("../pipelines/radiusRun.ts");
  await runRadius(run);
}

/** --variants as analyze reads it, with this command's name in the message. */
function variantsOf(text: string) {
  try {
    return variantsFlag(text);
  } catch (e) {
    throw new InputError((e as Error).message.replace(/^analyze:/, "radius:"));
  }
}
