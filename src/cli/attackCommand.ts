import { Command } from "commander";
import { z } from "zod";
import { TEXT_FILE_FLAGS } from "./flags.ts";
import type { AttackFlags } from "../pipelines/attackFlags.ts";
import { BACKENDS, type BackendName } from "../backend.ts";
import { parseSpec, specForms } from "../data/sources/index.ts";
import { ATTACK_DEFAULTS } from "../robustness/defaults.ts";
import { attackNames, attackSpec, attacksReading, type AttackSettingName } from "../robustness/attacks.ts";
import { InputError } from "../util/errors.ts";
import type { NumberRule } from "../util/numberFlag.ts";
import { checkpointArgumentHelp, firstFlagIssue, numberFlag, numberListFlag, optionWithDefault, resolveWorkers } from "./flags.ts";

export type { AttackFlags } from "../pipelines/attackFlags.ts";

/** Raw option strings as commander hands them over (absent = not given). */
export interface RawAttackOptions {
  model?: string;
  randomInit?: boolean;
  data?: string;
  norm?: string;
  eps?: string;
  steps?: string;
  stepSize?: string;
  restarts?: string;
  queries?: string;
  targets?: string;
  rangeCheck?: boolean;
  n?: string;
  batch?: string;
  seed?: string;
  attack?: string;
  backend?: string;
  workers?: string;
  out?: string;
  force?: boolean;
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
  restarts: "--restarts",
  queries: "--queries",
  targets: "--targets",
  rangeCheck: "--no-range-check",
  n: "--n",
  batch: "--batch",
  seed: "--seed",
  attack: "--attack",
  backend: "--backend",
  workers: "--workers",
  out: "--out",
  force: "--force",
  textColumn: "--text-column",
  labelColumn: "--label-column",
  encoding: "--encoding",
};

/** Default radii for images when --eps is not given (ATTACK_DEFAULTS.eps.image). */
export const DEFAULT_EPS: Readonly<Record<"linf" | "l2", readonly number[]>> = ATTACK_DEFAULTS.eps.image;

/** The word for the default pair of attacks (ATTACK_DEFAULTS.attacks: fgsm and pgd). */
const DEFAULT_SET = "both";

/**
 * What --attack accepts: a registered attack's name, several separated by commas, or "both"
 * (the default attacks, fgsm and pgd). Read from the registry when called, so an attack
 * registered later is a choice too.
 *
 * @example attackChoices() // ["pgd", "fgsm", "both"]
 */
export function attackChoices(): string[] {
  return [...attackNames(), DEFAULT_SET];
}

/**
 * The attacks an --attack value names, in the order given (duplicates dropped).
 *
 * @returns the registered names, or null when the value names something else.
 * @example parseAttackList("pgd,fgsm") // ["pgd", "fgsm"]
 */
export function parseAttackList(value: string): string[] | null {
  const known = attackNames();
  const names = value.split(",").map((t) => t.trim());
  const out: string[] = [];
  for (const name of names) {
    if (name === DEFAULT_SET) out.push(...ATTACK_DEFAULTS.attacks);
    else if (known.includes(name)) out.push(name);
    else return null;
  }
  return [...new Set(out)];
}

/** "a, b or c". */
const orList = (items: string[]) =>
  items.length <= 1 ? items.join("") : `${items.slice(0, -1).join(", ")} or ${items.at(-1)}`;

/** The attacks that read a shared setting, for --help ("pgd"). */
const usersOf = (setting: AttackSettingName) =>
  attacksReading(setting).join(", ") || "none";

/** The limits of the numeric flags (the words of their errors come from util/numberFlag.ts). */
const COUNT = (max: number): NumberRule => ({ integer: true, min: 1, max });
const SEED: NumberRule = { integer: true, min: 0, max: 0xffffffff };

const AttackFlagsSchema = z.object({
  model: z.string().min(1, "must not be empty").optional(),
  randomInit: z.boolean().optional(),
  data: z
    .string()
    .superRefine((s, ctx) => {
      try {
        parseSpec(s); // any registered source, image or text
      } catch {
        ctx.addIssue({ code: "custom", message: `expected ${specForms()}` });
      }
    })
    .optional(),
  norm: z.enum(["linf", "l2"], "expected linf or l2").optional(),
  // Only what holds in every input space: the upper limit of a radius depends on the model's
  // inputs (an image data set's pixel range and size; none for text embeddings), so the
  // runner checks it once the data is known (attackRun.ts).
  eps: numberListFlag({ min: 0 }).optional(),
  steps: numberFlag(COUNT(10000)).optional(),
  stepSize: numberFlag({ above: 0 }).optional(),
  restarts: numberFlag(COUNT(100)).optional(),
  queries: numberFlag(COUNT(1000000)).optional(),
  targets: numberFlag(COUNT(1000)).optional(),
  n: numberFlag(COUNT(10000)).optional(),
  batch: numberFlag(COUNT(4096)).optional(),
  seed: numberFlag(SEED).optional(),
  attack: z
    .string()
    .transform((s, ctx) => {
      const names = parseAttackList(s);
      if (names === null) {
        ctx.addIssue({
          code: "custom",
          message: `expected ${orList(attackChoices())} (or several names separated by commas)`,
        });
        return z.NEVER;
      }
      return names;
    })
    .optional(),
  backend: z
    .enum(BACKENDS as [BackendName, ...BackendName[]], `expected ${BACKENDS.join(" or ")}`)
    .optional(),
  workers: numberFlag(COUNT(256)).optional(),
  out: z.string().min(1, "must not be empty").optional(),
  ...TEXT_FILE_FLAGS,
});

/**
 * One warning per setting flag given that none of the chosen attacks reads (it would be silently
 * ignored): e.g. --step-size with APGD alone, whose step size adapts.
 *
 * @example unreadSettingWarnings({ stepSize: "0.1" }, ["apgd"])
 *   // ["attack: warning: --step-size is not read by apgd (it is read by pgd)"]
 */
export function unreadSettingWarnings(raw: RawAttackOptions, attacks: readonly string[]): string[] {
  const settings = [
    ["steps", "--steps"],
    ["stepSize", "--step-size"],
    ["restarts", "--restarts"],
    ["queries", "--queries"],
    ["targets", "--targets"],
  ] as const;
  const out: string[] = [];
  for (const [key, flag] of settings) {
    if (raw[key] === undefined || attacksReading(key, attacks).length > 0) continue;
    out.push(`attack: warning: ${flag} is not read by ${attacks.join(", ")} (it is read by ${usersOf(key)})`);
  }
  return out;
}

/**
 * Validates the attack command's flags and fills the defaults (ATTACK_DEFAULTS: mnist, linf,
 * eps by norm, each attack's own steps (PGD 10, APGD 100), step size by rule, 5000 Square
 * queries, 9 APGD-T targets, n 64, batch 32, seed 0, fgsm and pgd, the range check, wasm). Radii
 * are checked here only for what holds in every input space (finite, >= 0); their upper limit
 * depends on the data (images: the pixel range and the image size; text embeddings: none) and
 * is checked by runAttack.
 *
 * @throws InputError with one line naming the flag, the problem and the value, e.g.
 *   `attack: --eps: must be a comma-separated list of finite numbers >= 0, got "-0.1"`.
 */
export function parseAttackFlags(raw: RawAttackOptions): AttackFlags {
  const result = AttackFlagsSchema.safeParse(raw);
  if (!result.success) throw firstFlagIssue("attack", result.error, raw, FLAGS);
  const f = result.data;
  const d = ATTACK_DEFAULTS;
  const norm = f.norm ?? d.norm;
  const eps = f.eps ?? [...DEFAULT_EPS[norm]];
  return {
    model: f.model ?? d.model,
    randomInit: f.randomInit ?? false,
    data: f.data ?? d.data,
    norm,
    eps,
    steps: f.steps ?? null,
    stepSize: f.stepSize ?? d.stepSize,
    restarts: f.restarts ?? d.restarts,
    queries: f.queries ?? d.queries,
    targets: f.targets ?? d.targets,
    rangeCheck: raw.rangeCheck !== false,
    n: f.n ?? d.n,
    batch: f.batch ?? d.batch,
    seed: f.seed ?? d.seed,
    attacks: f.attack ?? [...d.attacks],
    backend: f.backend ?? d.backend,
    ...(f.workers === undefined ? {} : { workers: f.workers }),
    out: f.out,
    force: raw.force === true,
  };
}

/**
 * `attnlip attack [DIR]`: clean and robust accuracy under the registered attacks (FGSM, PGD,
 * APGD-CE, APGD-DLR, APGD-T, Square, AutoAttack; l_inf or l_2) of a trained checkpoint (or a
 * random-init preset) on the first N test examples, the masking checks, plus the median
 * Lipschitz proxy radius; writes DIR/attack.json (or --out).
 */
export function attackCommand(): Command {
  const d = ATTACK_DEFAULTS;
  const eps = (r: Record<"linf" | "l2", readonly number[]>) => `linf ${r.linf.join(",")}, l2 ${r.l2.join(",")}`;
  const attacks = attackNames()
    .map((a) => `${a} (${attackSpec(a).summary})`)
    .join("; ");
  return new Command("attack")
    .description(
      `robust accuracy under ${attackNames().map((a) => attackSpec(a).label).join(", ")} (l_inf or l_2; images: inputs clipped to [0, 1]; text: token embeddings of the real tokens, no clipping; model in inference mode) and the margin / (sqrt(2) L) proxy radius`,
    )
    .argument("[checkpoint]", checkpointArgumentHelp())
    .addOption(optionWithDefault("--model <preset|json>", "model preset or JSON config (as train takes it) with --random-init", String(d.model)))
    .option("--random-init", "attack a freshly initialised model (seeded) instead of a checkpoint")
    .addOption(optionWithDefault("--data <spec>", `${specForms()}; the test split is used`, "a checkpoint: its own data and held-out split; else mnist, spam for text models"))
    .addOption(optionWithDefault("--text-column <name>", "text data files: the column / key of the text", "the checkpoint's, else text"))
    .addOption(optionWithDefault("--label-column <name>", "text data files: the column / key of the label", "the checkpoint's, else label"))
    .addOption(optionWithDefault("--encoding <name>", "text data files: the character encoding, e.g. utf-8, windows-1252", "the checkpoint's, else auto: UTF-16 after its byte-order mark, else UTF-8, else Windows-1252"))
    .addOption(optionWithDefault("--norm <norm>", "threat model: linf or l2", String(d.norm)))
    .addOption(optionWithDefault("--eps <list>", "radii separated by commas, e.g. 0,0.05,0.1 (images: linf at most the width of the pixel range, l2 at most its diameter, sqrt(H*W*C) on [0, 1]; text embeddings: no upper limit)", `images: ${eps(d.eps.image)}; text (embedding units): ${eps(d.eps.text)}`))
    .addOption(optionWithDefault("--steps <k>", `steps of the iterative attacks (${usersOf("steps")})`, `each attack's own: pgd ${d.steps}, the apgd attacks ${d.apgdSteps} (the paper's)`))
    .addOption(optionWithDefault("--step-size <a>", `step size of the iterative attacks (${usersOf("stepSize")})`, "2.5 * eps / steps"))
    .addOption(optionWithDefault("--restarts <k>", `runs from new random starts, an input counting as broken when any run breaks it (${usersOf("restarts")}; apgd-t: per target class)`, String(d.restarts)))
    .addOption(optionWithDefault("--queries <k>", `query budget per input of the score-based attacks (${usersOf("queries")}); lower it to cut the time`, `${d.queries}, AutoAttack's`))
    .addOption(optionWithDefault("--targets <k>", `target classes of the targeted attacks, the top k after the true one (${usersOf("targets")}; at most classes - 1 are used)`, `${d.targets}, AutoAttack's`))
    .option("--no-range-check", "skip the range check: by default the attacks run once more at the radius of the whole input range (images: the pixel range; text: the range of the inputs' embedding entries), where an attack with a usable gradient breaks every input, for the masking checks")
    .addOption(optionWithDefault("--n <int>", "the first n test examples", String(d.n)))
    .addOption(optionWithDefault("--batch <int>", "examples per pass", String(d.batch)))
    .addOption(optionWithDefault("--seed <int>", `seed of the random starts (${usersOf("seed")}) and --random-init; also of the data split, except for a checkpoint on its own data, which is always evaluated on its held-out split`, String(d.seed)))
    .addOption(
      optionWithDefault(
        "--attack <name>",
        `${orList(attackChoices())}, or several names separated by commas; both = ${d.attacks.join(" and ")}. Attacks: ${attacks}`,
        "both",
      ),
    )
    .addOption(optionWithDefault("--backend <name>", "tfjs backend: wasm or cpu", String(d.backend)))
    .addOption(optionWithDefault("--workers <int>", "worker threads, each attacking whole batches with its own model copy (1: no workers; the results are the same)", "the number of cores"))
    .addOption(optionWithDefault("--out <file>", "where attack.json goes", "CHECKPOINT/attack.json; none with --random-init"))
    .option("--force", "replace an existing attack.json (without it, an earlier result is never overwritten)")
    .action(async (checkpoint: string | undefined, raw: RawAttackOptions) => {
      const flags = parseAttackFlags(raw);
      for (const warning of unreadSettingWarnings(raw, flags.attacks)) console.error(warning);
      // Now: a bad ATTNLIP_WORKERS stops the run before anything loads.
      resolveWorkers(flags.workers, "attack");
      if (checkpoint === undefined && !flags.randomInit)
        throw new InputError("attack: give a checkpoint folder, or --random-init with --model");
      if (checkpoint !== undefined && flags.randomInit)
        throw new InputError("attack: give either a checkpoint folder or --random-init, not both");
      if (checkpoint !== undefined && raw.model !== undefined)
        throw new InputError(
          "attack: --model applies with --random-init only (a checkpoint has its own config)",
        );
      // Heavy modules load only when the command runs, so other commands stay fast.
      const { runAttack } = await import("../pipelines/attackRun.ts");
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
