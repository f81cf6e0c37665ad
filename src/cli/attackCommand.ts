import { Command } from "commander";
import { z } from "zod";
import { BACKENDS, type BackendName } from "../backend.ts";
import { parseDataSpec } from "../data/dataset.ts";
import { checkEncoding } from "../data/text/charset.ts";
import { isTextDataSpec } from "../data/text/dataset.ts";
import { UsageError } from "./errors.ts";

/** Raw option strings as commander hands them over (absent = not given). */
export interface RawAttackOptions {
  model?: string;
  randomInit?: boolean;
  data?: string;
  norm?: string;
  eps?: string;
  steps?: string;
  stepSize?: string;
  n?: string;
  batch?: string;
  seed?: string;
  attack?: string;
  backend?: string;
  out?: string;
  textColumn?: string;
  labelColumn?: string;
  encoding?: string;
}

/** Flag spelled as the user typed it, by option key. */
const FLAGS: Record<keyof RawAttackOptions, string> = {
  model: "--model",
  randomInit: "--random-init",
  data: "--data",
  norm: "--norm",
  eps: "--eps",
  steps: "--steps",
  stepSize: "--step-size",
  n: "--n",
  batch: "--batch",
  seed: "--seed",
  attack: "--attack",
  backend: "--backend",
  out: "--out",
  textColumn: "--text-column",
  labelColumn: "--label-column",
  encoding: "--encoding",
};

/** Largest l_inf radius: the whole [0, 1] range. */
export const MAX_EPS_LINF = 1;
/** Largest l_2 radius accepted at parse time: sqrt(28 * 28), the diagonal of [0, 1]^784 (MNIST). */
export const MAX_EPS_L2 = 28;

/** Default radii when --eps is not given. */
export const DEFAULT_EPS: Record<"linf" | "l2", number[]> = {
  linf: [0, 0.05, 0.1, 0.2],
  l2: [0, 0.5, 1, 2],
};

const NUMBER = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

/** A decimal number written in full (no "", "0x10", "NaN", "Infinity"), then checked by `then`. */
const num = (then: z.ZodNumber) =>
  z.string().trim().regex(NUMBER, "must be a number").transform(Number).pipe(then);
const positiveInt = (max: number) =>
  num(
    z
      .number()
      .int("must be a whole number")
      .min(1, "must be at least 1")
      .max(max, `must be at most ${max}`),
  );

const AttackFlagsSchema = z.object({
  model: z.string().min(1, "must not be empty").optional(),
  randomInit: z.boolean().optional(),
  data: z
    .string()
    .superRefine((s, ctx) => {
      try {
        if (!isTextDataSpec(s)) parseDataSpec(s);
      } catch {
        ctx.addIssue({
          code: "custom",
          message:
            "expected mnist, idx:DIR or cifar10:DIR (images), or spam, csv:FILE or jsonl:FILE (text)",
        });
      }
    })
    .optional(),
  norm: z.enum(["linf", "l2"], "expected linf or l2").optional(),
  eps: z
    .string()
    .transform((s) => s.split(",").map((t) => t.trim()))
    .pipe(
      z
        .array(
          num(z.number().finite("must be finite").min(0, "must be >= 0")),
          "expected numbers separated by commas",
        )
        .min(1),
    )
    .optional(),
  steps: positiveInt(10000).optional(),
  stepSize: num(z.number().finite("must be finite").positive("must be > 0")).optional(),
  n: positiveInt(10000).optional(),
  batch: positiveInt(4096).optional(),
  seed: num(
    z
      .number()
      .int("must be a whole number")
      .min(0, "must be >= 0")
      .max(0xffffffff, "must be < 2^32"),
  ).optional(),
  attack: z.enum(["pgd", "fgsm", "both"], "expected pgd, fgsm or both").optional(),
  backend: z
    .enum(BACKENDS as [BackendName, ...BackendName[]], `expected ${BACKENDS.join(" or ")}`)
    .optional(),
  out: z.string().min(1, "must not be empty").optional(),
  textColumn: z.string().min(1, "must not be empty").optional(),
  labelColumn: z.string().min(1, "must not be empty").optional(),
  encoding: z
    .string()
    .superRefine((s, ctx) => {
      try {
        checkEncoding(s);
      } catch (e) {
        ctx.addIssue({ code: "custom", message: (e as Error).message });
      }
    })
    .optional(),
});

/** Validated flags with defaults filled. */
export interface AttackFlags {
  model: string;
  randomInit: boolean;
  data: string;
  norm: "linf" | "l2";
  eps: number[];
  steps: number;
  /** null = the default rule 2.5 * eps / steps. */
  stepSize: number | null;
  n: number;
  batch: number;
  seed: number;
  attacks: ("fgsm" | "pgd")[];
  backend: BackendName;
  out?: string;
}

/**
 * Validates the attack command's flags and fills the defaults (mnist, linf, eps by norm,
 * 10 steps, step size by rule, n 64, batch 32, seed 0, both attacks, wasm).
 *
 * @throws UsageError with one line naming the flag and the problem, e.g.
 *   `attack: --eps: must be >= 0 (got "-0.1")`, or an eps above 1 (linf) / 28 (l_2).
 */
export function parseAttackFlags(raw: RawAttackOptions): AttackFlags {
  const result = AttackFlagsSchema.safeParse(raw);
  if (!result.success) {
    const issue = result.error.issues[0];
    const key = issue.path[0] as keyof RawAttackOptions;
    throw new UsageError(
      `attack: ${FLAGS[key] ?? String(key)}: ${issue.message} (got ${JSON.stringify(raw[key])})`,
    );
  }
  const f = result.data;
  const norm = f.norm ?? "linf";
  const eps = f.eps ?? DEFAULT_EPS[norm];
  const max = norm === "linf" ? MAX_EPS_LINF : MAX_EPS_L2;
  const bad = eps.find((e) => e > max);
  if (bad !== undefined)
    throw new UsageError(
      `attack: --eps: ${bad} is out of range for --norm ${norm} (at most ${max}${norm === "linf" ? ", the pixel range" : ", the l_2 diameter of a 28x28 image in [0, 1]"})`,
    );
  const attack = f.attack ?? "both";
  return {
    model: f.model ?? "vit-tiny",
    randomInit: f.randomInit ?? false,
    data: f.data ?? "mnist",
    norm,
    eps,
    steps: f.steps ?? 10,
    stepSize: f.stepSize ?? null,
    n: f.n ?? 64,
    batch: f.batch ?? 32,
    seed: f.seed ?? 0,
    attacks: attack === "both" ? ["fgsm", "pgd"] : [attack],
    backend: f.backend ?? "wasm",
    out: f.out,
  };
}

/**
 * `attnlip attack [DIR]`: clean and robust accuracy (FGSM, PGD; l_inf or l_2) of a trained
 * checkpoint (or a random-init preset) on the first N test examples, plus the median
 * Lipschitz proxy radius; writes DIR/attack.json (or --out).
 */
export function attackCommand(): Command {
  return new Command("attack")
    .description(
      "robust accuracy under FGSM and PGD (l_inf or l_2; images: inputs clipped to [0, 1]; text: token embeddings of the real tokens, no clipping; model in inference mode) and the margin / (sqrt(2) L) proxy radius",
    )
    .argument(
      "[checkpoint]",
      "a checkpoint folder written by `attnlip train` (or use --model with --random-init)",
    )
    .option("--model <preset>", "model preset with --random-init [vit-tiny]")
    .option("--random-init", "attack a freshly initialised model (seeded) instead of a checkpoint")
    .option(
      "--data <spec>",
      "mnist (embedded) | idx:DIR | cifar10:DIR | spam | csv:FILE | jsonl:FILE; the test split is used [a checkpoint: its own data and held-out split; else mnist, spam for text models]",
    )
    .option(
      "--text-column <name>",
      "text data files: the column / key of the text [the checkpoint's, else text]",
    )
    .option(
      "--label-column <name>",
      "text data files: the column / key of the label [the checkpoint's, else label]",
    )
    .option(
      "--encoding <name>",
      "text data files: the character encoding, e.g. utf-8, windows-1252 [the checkpoint's, else auto: UTF-8, else Windows-1252]",
    )
    .option("--norm <norm>", "threat model: linf or l2 [linf]")
    .option(
      "--eps <list>",
      "radii separated by commas, e.g. 0,0.05,0.1 (linf <= 1, l2 <= 28) [images: linf 0,0.05,0.1,0.2, l2 0,0.5,1,2; text (embedding units): linf 0,0.01,0.02,0.05, l2 0,0.25,0.5,1]",
    )
    .option("--steps <k>", "PGD steps [10]")
    .option("--step-size <a>", "PGD step size [2.5 * eps / steps]")
    .option("--n <int>", "the first n test examples [64]")
    .option("--batch <int>", "examples per pass [32]")
    .option("--seed <int>", "seed of the PGD random start and --random-init; also of the data split, except for a checkpoint on its own data, which is always evaluated on its held-out split [0]")
    .option("--attack <name>", "pgd, fgsm or both [both]")
    .option("--backend <name>", "wasm or cpu [wasm]")
    .option(
      "--out <file>",
      "where attack.json goes [CHECKPOINT/attack.json; none with --random-init]",
    )
    .action(async (checkpoint: string | undefined, raw: RawAttackOptions) => {
      const flags = parseAttackFlags(raw);
      if (checkpoint === undefined && !flags.randomInit)
        throw new UsageError("attack: give a checkpoint folder, or --random-init with --model");
      if (checkpoint !== undefined && flags.randomInit)
        throw new UsageError("attack: give either a checkpoint folder or --random-init, not both");
      if (checkpoint !== undefined && raw.model !== undefined)
        throw new UsageError(
          "attack: --model applies with --random-init only (a checkpoint has its own config)",
        );
      // Heavy modules load only when the command runs, so other commands stay fast.
      const { runAttack } = await import("../robustness/run.ts");
      // Left out: data and eps then default by model kind (a text checkpoint: its own data, text radii).
      await runAttack({
        ...flags,
        data: raw.data === undefined ? undefined : flags.data,
        eps: raw.eps === undefined ? undefined : flags.eps,
        textColumn: raw.textColumn,
        labelColumn: raw.labelColumn,
        encoding: raw.encoding,
        checkpoint,
      });
    });
}
