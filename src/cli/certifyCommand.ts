import { Command } from "commander";
import { z } from "zod";
import { BACKENDS, type BackendName } from "../backend.ts";
import { parseSpec, specForms } from "../data/sources/index.ts";
import { InputError } from "../util/errors.ts";
import type { NumberRule } from "../util/numberFlag.ts";
import {
  TEXT_FILE_FLAGS,
  checkpointArgumentHelp,
  firstFlagIssue,
  numberFlag,
  numberListFlag,
  optionWithDefault,
} from "./flags.ts";

/** Raw option strings as commander hands them over (absent = not given). */
export interface RawCertifyOptions {
  model?: string;
  randomInit?: boolean;
  data?: string;
  norm?: string;
  n?: string;
  radii?: string;
  seed?: string;
  backend?: string;
  out?: string;
  force?: boolean;
  textColumn?: string;
  labelColumn?: string;
  encoding?: string;
}

/** Flag spelled as the user typed it, by option key. */
const FLAGS: Record<keyof RawCertifyOptions, string> = {
  model: "--model",
  randomInit: "--random-init",
  data: "--data",
  norm: "--norm",
  n: "--n",
  radii: "--radii",
  seed: "--seed",
  backend: "--backend",
  out: "--out",
  force: "--force",
  textColumn: "--text-column",
  labelColumn: "--label-column",
  encoding: "--encoding",
};

const SEED: NumberRule = { integer: true, min: 0, max: 0xffffffff };

const CertifyFlagsSchema = z.object({
  model: z.string().min(1, "must not be empty").optional(),
  randomInit: z.boolean().optional(),
  data: z
    .string()
    .superRefine((s, ctx) => {
      try {
        parseSpec(s);
      } catch {
        ctx.addIssue({ code: "custom", message: `expected ${specForms()}` });
      }
    })
    .optional(),
  norm: z.enum(["l2", "linf"], "expected l2 or linf").optional(),
  n: numberFlag({ integer: true, min: 1, max: 100000 }).optional(),
  radii: numberListFlag({ min: 0 }).optional(),
  seed: numberFlag(SEED).optional(),
  backend: z
    .enum(BACKENDS as [BackendName, ...BackendName[]], `expected ${BACKENDS.join(" or ")}`)
    .optional(),
  out: z.string().min(1, "must not be empty").optional(),
  ...TEXT_FILE_FLAGS,
});

/** Validated flags (absent: the runner's default). */
export interface CertifyFlags {
  model?: string;
  randomInit: boolean;
  data?: string;
  norm: "l2" | "linf";
  n: number;
  radii?: number[];
  seed: number;
  backend: BackendName;
  out?: string;
  force: boolean;
}

/**
 * Validates the certify command's flags and fills the defaults (l2, n 100, seed 0, wasm; radii
 * and data by the model's kind, in the runner).
 *
 * @throws InputError with one line naming the flag, e.g.
 *   `certify: --radii: must be a comma-separated list of finite numbers >= 0, got "-1"`.
 * @example parseCertifyFlags({ norm: "linf", n: "16" }).n // 16
 */
export function parseCertifyFlags(raw: RawCertifyOptions): CertifyFlags {
  const result = CertifyFlagsSchema.safeParse(raw);
  if (!result.success) throw firstFlagIssue("certify", result.error, raw, FLAGS);
  const f = result.data;
  return {
    ...(f.model === undefined ? {} : { model: f.model }),
    randomInit: f.randomInit ?? false,
    ...(f.data === undefined ? {} : { data: f.data }),
    norm: f.norm ?? "l2",
    n: f.n ?? 100,
    ...(f.radii === undefined ? {} : { radii: [...new Set(f.radii)].sort((a, b) => a - b) }),
    seed: f.seed ?? 0,
    backend: f.backend ?? "wasm",
    ...(f.out === undefined ? {} : { out: f.out }),
    force: raw.force === true,
  };
}

/**
 * `attnlip certify [DIR]`: for the first N held-out inputs (those `attack` uses), a bound L(x, r)
 * of the logits' Jacobian norm over the whole ball B(x, r), the largest radius with
 * margin > sqrt(2) L(x, r) r (no input in that ball changes the prediction), with the
 * attention distribution's probability boxes and with the worst-case softmax norm 1/2, and the
 * certified accuracy per radius; writes DIR/certify.json and DIR/certify.csv (or --out DIR).
 */
export function certifyCommand(): Command {
  const command = new Command("certify")
    .description(
      "certified robustness from Lipschitz bounds over balls: each input's certified radius (no input within it changes the prediction) and certified accuracy per radius, with the distribution-aware bound and with the softmax constant 1/2 (images: pixel space; text: token-embedding space, as attack)",
    )
    .argument("[checkpoint]", checkpointArgumentHelp());
  certifyOptions(modelAndDataOptions(command));
  return command.action(certifyAction);
}

/** The model and the held-out data: as `attack` takes them. */
function modelAndDataOptions(command: Command): Command {
  return command
    .addOption(
      optionWithDefault(
        "--model <preset|json>",
        "model preset or JSON config with --random-init",
        "vit-tiny",
      ),
    )
    .option("--random-init", "certify a freshly initialised model (seeded) instead of a checkpoint")
    .addOption(
      optionWithDefault(
        "--data <spec>",
        `${specForms()}; the test split is used`,
        "a checkpoint: its own data and held-out split; else mnist, spam for text models",
      ),
    )
    .addOption(
      optionWithDefault(
        "--text-column <name>",
        "text data files: the column / key of the text",
        "the checkpoint's, else text",
      ),
    )
    .addOption(
      optionWithDefault(
        "--label-column <name>",
        "text data files: the column / key of the label",
        "the checkpoint's, else label",
      ),
    )
    .addOption(
      optionWithDefault(
        "--encoding <name>",
        "text data files: the character encoding",
        "the checkpoint's, else auto",
      ),
    );
}

/** The threat model, the inputs and radii, and where the results go. */
function certifyOptions(command: Command): Command {
  return command
    .addOption(
      optionWithDefault(
        "--norm <norm>",
        "threat model: l2, or linf (through ||d||_2 <= sqrt(D) ||d||_inf)",
        "l2",
      ),
    )
    .addOption(
      optionWithDefault(
        "--n <int>",
        "the first n held-out test examples (the ones attack --n uses)",
        "100",
      ),
    )
    .addOption(
      optionWithDefault(
        "--radii <list>",
        "radii separated by commas at which certified accuracy is reported (input units: pixels, or embedding units)",
        "0, the decades 1e-12 to 1e-2, and attack's default radii for the input kind and norm",
      ),
    )
    .addOption(
      optionWithDefault(
        "--seed <int>",
        "seed of --random-init and of the data split (as attack)",
        "0",
      ),
    )
    .addOption(
      optionWithDefault(
        "--backend <name>",
        `tfjs backend of the traced forward pass: ${BACKENDS.join(" or ")}`,
        "wasm",
      ),
    )
    .addOption(
      optionWithDefault(
        "--out <dir>",
        "the folder certify.json and certify.csv go to",
        "the checkpoint folder; none with --random-init or a Hugging Face folder",
      ),
    )
    .option(
      "--force",
      "replace existing certify.json and certify.csv (without it, earlier results are never overwritten)",
    );
}

/** Checks the flags against the checkpoint argument and runs the pipeline. */
async function certifyAction(
  checkpoint: string | undefined,
  raw: RawCertifyOptions,
): Promise<void> {
  const flags = parseCertifyFlags(raw);
  if (checkpoint === undefined && !flags.randomInit)
    throw new InputError("certify: give a checkpoint folder, or --random-init with --model");
  if (checkpoint !== undefined && flags.randomInit)
    throw new InputError("certify: give either a checkpoint folder or --random-init, not both");
  if (checkpoint !== undefined && raw.model !== undefined)
    throw new InputError(
      "certify: --model applies with --random-init only (a checkpoint has its own config)",
    );
  // Heavy modules load only when the command runs, so other commands stay fast.
  const { runCertify } = await import("../pipelines/certifyRun.ts");
  await runCertify({
    ...flags,
    checkpoint,
    textColumn: raw.textColumn,
    labelColumn: raw.labelColumn,
    encoding: raw.encoding,
  });
}
