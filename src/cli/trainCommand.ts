import { Command } from "commander";
import { z } from "zod";
import { TEXT_FILE_FLAGS } from "./flags.ts";
import { BACKENDS, useBackend, type BackendName } from "../backend.ts";
import { specForms, specTask } from "../data/sources/index.ts";
import { kindOfModel } from "../train/kinds/index.ts";
import {
  JASMIN_MAX_LAMBDA,
  JASMIN_NORMS,
  JASMIN_REDUCTIONS,
  type JasminNorm,
  type JasminReduce,
} from "../train/jasmin.ts";
import type { ProgressMode } from "../train/progress.ts";
import { checkOutPath } from "../io/outPath.ts";
import { InputError } from "../util/errors.ts";
import { trainInWorkers } from "../parallel/trainTask.ts";
import { interruptedLine } from "../train/trainer.ts";
import { TrainingDiverged } from "../train/epoch.ts";
import type { NumberRule } from "../util/numberFlag.ts";
import { firstFlagIssue, numberFlag, optionWithDefault, resolveWorkers } from "./flags.ts";

/** Raw option strings as commander hands them over (no defaults: absent = not given). */
interface RawTrainOptions {
  data?: string;
  textColumn?: string;
  labelColumn?: string;
  encoding?: string;
  model?: string;
  epochs?: string;
  batch?: string;
  lr?: string;
  minLr?: string;
  weightDecay?: string;
  warmup?: string;
  clip?: string;
  augmentShift?: string;
  jasmin?: string;
  jasminNorm?: string;
  jasminReduce?: string;
  jasminLayers?: string;
  seed?: string;
  out?: string;
  limit?: string;
  testLimit?: string;
  backend?: string;
  resume?: string;
  init?: string;
  progress?: string;
  workers?: string;
}

/** Flag spelled as the user typed it, by option key. */
const FLAGS: Record<keyof RawTrainOptions, string> = {
  data: "--data",
  textColumn: "--text-column",
  labelColumn: "--label-column",
  encoding: "--encoding",
  model: "--model",
  epochs: "--epochs",
  batch: "--batch",
  lr: "--lr",
  minLr: "--min-lr",
  weightDecay: "--weight-decay",
  warmup: "--warmup",
  clip: "--clip",
  augmentShift: "--augment-shift",
  jasmin: "--jasmin",
  jasminNorm: "--jasmin-norm",
  jasminReduce: "--jasmin-reduce",
  jasminLayers: "--jasmin-layers",
  seed: "--seed",
  out: "--out",
  limit: "--limit",
  testLimit: "--test-limit",
  backend: "--backend",
  resume: "--resume",
  init: "--init",
  progress: "--progress",
  workers: "--workers",
};

/** Options the checkpoint fixes: giving them with --resume is an error. */
const FIXED_BY_CHECKPOINT: (keyof RawTrainOptions)[] = [
  "data",
  "textColumn",
  "labelColumn",
  "encoding",
  "model",
  "batch",
  "lr",
  "minLr",
  "weightDecay",
  "warmup",
  "clip",
  "augmentShift",
  "jasmin",
  "jasminNorm",
  "jasminReduce",
  "jasminLayers",
  "seed",
  "limit",
  "testLimit",
];

/** Options the base checkpoint fixes: giving them with --init is an error (its data and split stay held out). */
const FIXED_BY_BASE: (keyof RawTrainOptions)[] = [
  "data",
  "textColumn",
  "labelColumn",
  "encoding",
  "model",
  "seed",
  "limit",
  "testLimit",
];

/** The numeric flags' limits (the words of their errors come from util/numberFlag.ts). */
const POSITIVE_INT: NumberRule = { integer: true, min: 1 };
const NON_NEGATIVE_INT: NumberRule = { integer: true, min: 0 };
const NON_NEGATIVE: NumberRule = { min: 0 };
const LAMBDA: NumberRule = {
  min: 0,
  max: JASMIN_MAX_LAMBDA,
  why: "beyond that the penalty drowns the cross-entropy in float32",
};

/** Epochs: the learning-rate schedule counts steps over all of them, so they must stay countable. */
export const EPOCHS: NumberRule = { integer: true, min: 1, max: 100000 };

/** The peak learning rate when --lr is not given (train/setup.ts's default, and the help text's). */
const DEFAULT_LR = 0.002;

const TrainFlagsSchema = z.object({
  data: z
    .string()
    .superRefine((s, ctx) => {
      if (specTask(s) === null)
        ctx.addIssue({ code: "custom", message: `expected ${specForms()}` });
    })
    .optional(),
  ...TEXT_FILE_FLAGS,
  model: z.string().min(1, "must not be empty").optional(),
  epochs: numberFlag(EPOCHS).optional(),
  batch: numberFlag(POSITIVE_INT).optional(),
  lr: numberFlag({ above: 0 }).optional(),
  minLr: numberFlag(NON_NEGATIVE).optional(),
  weightDecay: numberFlag(NON_NEGATIVE).optional(),
  warmup: numberFlag(NON_NEGATIVE_INT).optional(),
  clip: numberFlag(NON_NEGATIVE).optional(),
  augmentShift: numberFlag({ integer: true, min: 0, max: 1000 }).optional(),
  jasmin: numberFlag(LAMBDA).optional(),
  jasminNorm: z
    .enum(JASMIN_NORMS as [JasminNorm, ...JasminNorm[]], "expected top2, quad or exact")
    .optional(),
  jasminReduce: z
    .enum(JASMIN_REDUCTIONS as [JasminReduce, ...JasminReduce[]], "expected max-log, max or mean")
    .optional(),
  jasminLayers: z
    .string()
    .trim()
    .regex(
      /^\d+(\s*,\s*\d+)*$/,
      "must be block indices (integers >= 0) separated by commas, e.g. 0,1",
    )
    .transform((s) => s.split(",").map((t) => Number(t.trim())))
    .optional(),
  seed: numberFlag({ integer: true, min: 0, max: 0xffffffff }).optional(),
  out: z.string().min(1, "must not be empty").optional(),
  limit: numberFlag(POSITIVE_INT).optional(),
  testLimit: numberFlag(POSITIVE_INT).optional(),
  backend: z
    .enum(BACKENDS as [BackendName, ...BackendName[]], `expected ${BACKENDS.join(" or ")}`)
    .optional(),
  resume: z.string().min(1, "must not be empty").optional(),
  init: z.string().min(1, "must not be empty").optional(),
  progress: z
    .enum(["auto", "bar", "lines", "none"], "expected auto, bar, lines or none")
    .optional(),
  workers: numberFlag({ integer: true, min: 1, max: 256 }).optional(),
});

/** Validated flags. */
export type TrainFlags = z.output<typeof TrainFlagsSchema>;

/**
 * Validates the train command's flags.
 *
 * @throws InputError with one line naming the flag, the problem and the value, e.g.
 *   `train: --epochs: must be an integer from 1 to 100000, got "1.5"`; or naming both flags when
 *   --min-lr is above --lr (given or default).
 */
export function parseTrainFlags(raw: RawTrainOptions): TrainFlags {
  const result = TrainFlagsSchema.safeParse(raw);
  if (!result.success) throw firstFlagIssue("train", result.error, raw, FLAGS);
  const flags = result.data;
  if (flags.minLr !== undefined && flags.minLr > (flags.lr ?? DEFAULT_LR))
    throw new InputError(
      `train: --min-lr ${flags.minLr} is above --lr ${flags.lr ?? `${DEFAULT_LR} (the default)`}: the cosine decay ends at --min-lr and must not rise above the peak rate --lr`,
    );
  if (flags.resume !== undefined && flags.init !== undefined)
    throw new InputError(
      "train: --resume and --init cannot be given together (--resume continues a run, --init starts a new one from a checkpoint's weights)",
    );
  if (flags.resume !== undefined) {
    const fixed = FIXED_BY_CHECKPOINT.find((k) => raw[k] !== undefined);
    if (fixed !== undefined)
      throw new InputError(
        `train: ${FLAGS[fixed]} cannot be given with --resume (the checkpoint fixes it; only --epochs may change)`,
      );
    if (flags.out !== undefined && flags.out !== flags.resume)
      throw new InputError(
        "train: --out must be left out with --resume (a resumed run writes to its own folder)",
      );
  } else if (flags.init !== undefined) {
    const fixed = FIXED_BY_BASE.find((k) => raw[k] !== undefined);
    if (fixed !== undefined)
      throw new InputError(
        `train: ${FLAGS[fixed]} cannot be given with --init (the run trains on the base checkpoint's data, split and model)`,
      );
  }
  if (flags.resume === undefined && flags.out === undefined)
    throw new InputError("train: --out DIR is required (where checkpoints and metrics go)");
  if (
    (flags.textColumn !== undefined ||
      flags.labelColumn !== undefined ||
      flags.encoding !== undefined) &&
    flags.resume === undefined &&
    !/^(csv|jsonl):/.test(flags.data ?? "")
  )
    throw new InputError(
      "train: --text-column, --label-column and --encoding apply to --data csv:FILE or jsonl:FILE only",
    );
  return flags;
}

/** The advice of a step that diverged, as train/epoch.ts words it. */
const LR_ADVICE = /; try a lower --lr, --clip or --jasmin, or check the data for NaN$/;

/**
 * A run started with --init that diverges at its first step diverged on the base checkpoint's
 * own weights (that step's loss and gradient come before any update), so "try a lower --lr"
 * is the wrong advice: its error says what the cause is instead (a logit of -Infinity, a class
 * the base's head rules out, for an example of that class; or NaN / infinite weights or data).
 * Any other error is returned as it is.
 *
 * @param init the --init folder, undefined without --init.
 * @example initDivergence(new TrainingDiverged("training diverged at epoch 1, step 1: the loss is Infinity (...); try a lower --lr, --clip or --jasmin, or check the data for NaN", 1, 1), "runs/base")
 *   // TrainingDiverged "...: the loss is Infinity (...); that is runs/base's own loss, before any update (--lr, --clip and --jasmin have not acted yet): ..."
 */
export function initDivergence(error: unknown, init: string | undefined): unknown {
  if (
    init === undefined ||
    !(error instanceof TrainingDiverged) ||
    error.step !== 1 ||
    !LR_ADVICE.test(error.message)
  )
    return error;
  const cause = /cross-entropy Infinity/.test(error.message)
    ? "an infinite logit makes the cross-entropy infinite, most likely -Infinity for an example's own class (a class the base's head rules out): train on data without that class, or give the class a finite logit in the base"
    : "its weights, or the data, hold NaN or infinite values";
  return new TrainingDiverged(
    error.message.replace(
      LR_ADVICE,
      `; that is ${init}'s own loss and gradient, before any update (--lr, --clip and --jasmin have not acted yet): ${cause}`,
    ),
    error.epoch,
    error.step,
  );
}

/**
 * The train command's flags after --data, in help order: the flags, the help, and the default
 * the help shows (absent for flags without one: --out, --resume and --init). --data's help lists
 * the registered data sources, so {@link trainCommand} adds it when it is called.
 */
const TRAIN_FLAG_HELP: readonly (readonly [flags: string, help: string, shown?: string])[] = [
  ["--text-column <name>", "csv/jsonl: the column / key holding the text", "text"],
  [
    "--label-column <name>",
    "csv/jsonl: the column / key holding the label (classes in sorted label order)",
    "label",
  ],
  [
    "--encoding <name>",
    "csv/jsonl: the file's character encoding, e.g. utf-8, windows-1252, iso-8859-15, utf-16le, shift_jis; recorded in the checkpoint",
    "auto: UTF-16 after its byte-order mark, else UTF-8, else Windows-1252",
  ],
  [
    "--model <preset|json>",
    "model preset (a ViT's image size and channels, a text model's classes come from the data) or a JSON config",
    "vit-tiny; text data: text-tiny",
  ],
  ["--epochs <n>", "epochs; with --resume, the new total", "3"],
  ["--batch <n>", "examples per step", "32"],
  ["--lr <x>", "peak learning rate", String(DEFAULT_LR)],
  ["--min-lr <x>", "learning rate at the end of the cosine decay, at most --lr", "0"],
  [
    "--weight-decay <x>",
    "decoupled weight decay on weight matrices (not biases, LayerNorm, embeddings)",
    "0.05",
  ],
  ["--warmup <steps>", "linear warm-up steps", "10% of all steps"],
  ["--clip <norm>", "clip gradients to this global l2 norm; 0 = off", "1"],
  [
    "--augment-shift <pixels>",
    "image data: shift each training image by a random whole number of pixels, at most this many each way (a new draw per image and epoch; the border fills with black)",
    "0: off",
  ],
  ["--jasmin <lambda>", `JaSMin weight lambda, at most ${JASMIN_MAX_LAMBDA}; 0 = off`, "0"],
  ["--jasmin-norm <norm>", "per-row sigma: top2, quad or exact", "top2"],
  ["--jasmin-reduce <r>", "max-log, max or mean", "max-log"],
  ["--jasmin-layers <list>", "block indices to regularise, e.g. 0,1", "all"],
  ["--seed <n>", "seed of initialisation, shuffling and the embedded-MNIST split", "0"],
  [
    "--out <dir>",
    "folder for checkpoints and metrics.jsonl, which must not hold a checkpoint (required, except with --resume)",
  ],
  ["--limit <n>", "use the first n training examples", "all"],
  ["--test-limit <n>", "use the first n test examples", "all"],
  ["--backend <name>", "tfjs backend: wasm or cpu", "wasm"],
  ["--resume <dir>", "continue the checkpoint in dir (to --epochs or its planned epochs)"],
  [
    "--init <dir>",
    "start a new run from the weights of the attnlip checkpoint in dir, on its data, split and seed (a fresh optimizer and schedule; e.g. fine-tune a trained model with JaSMin)",
  ],
  ["--progress <mode>", "auto (a bar on a terminal, lines otherwise), bar, lines or none", "auto"],
  [
    "--workers <int>",
    "worker threads, each computing the gradient of a slice of every batch (1: this thread only; a run repeated with the same count is bit-identical, and other counts agree to float32 rounding)",
    "the number of cores",
  ],
];

/** `attnlip train`: trains a ViT (images) or text classifier (text) with cross-entropy + lambda * JaSMin; checkpoints in --out. */
export function trainCommand(): Command {
  const command = new Command("train")
    .description(
      "train a ViT on MNIST / IDX / CIFAR-10, or a text classifier on SpamAssassin / CSV / JSONL, with cross-entropy + lambda * JaSMin (AdamW, warm-up + cosine, clipping), checkpointing each epoch",
    )
    .addOption(optionWithDefault("--data <spec>", specForms(undefined, true), "mnist"));
  for (const [flags, help, shown] of TRAIN_FLAG_HELP)
    if (shown === undefined) command.option(flags, help);
    else command.addOption(optionWithDefault(flags, help, shown));
  return command.action(runTrain);
}

/**
 * The settings of {@link trainInWorkers} from the train command's validated flags: each flag
 * under its setting's name, absent flags left undefined (train and the checkpoint fill them in).
 *
 * @example trainSettings(parseTrainFlags({ out: "runs/a", jasmin: "0.1" }), 1).jasmin?.lambda // 0.1
 */
function trainSettings(flags: TrainFlags, workers: number): Parameters<typeof trainInWorkers>[0] {
  return {
    workers,
    backend: flags.backend ?? "wasm",
    data: flags.data,
    textColumn: flags.textColumn,
    labelColumn: flags.labelColumn,
    encoding: flags.encoding,
    model: flags.model,
    epochs: flags.epochs,
    batchSize: flags.batch,
    lr: flags.lr,
    minLr: flags.minLr,
    weightDecay: flags.weightDecay,
    warmupSteps: flags.warmup,
    clip: flags.clip,
    augmentShift: flags.augmentShift,
    jasmin: {
      lambda: flags.jasmin,
      norm: flags.jasminNorm,
      reduce: flags.jasminReduce,
      layers: flags.jasminLayers,
    },
    seed: flags.seed,
    out: flags.out,
    limit: flags.limit,
    testLimit: flags.testLimit,
    resume: flags.resume,
    init: flags.init,
    progress: (flags.progress ?? "auto") as ProgressMode,
  };
}

/**
 * The train command's action: checks the flags and --out, trains (in worker threads with
 * --workers), and prints the final line. Ctrl-C prints one line saying what the last checkpoint
 * holds and how to continue it, then exits with status 130.
 *
 * @throws InputError on bad flags or an --out that cannot be written (before any work);
 *   what training throws (a divergence at --init's first step with its own advice).
 */
async function runTrain(raw: RawTrainOptions, command: Command): Promise<void> {
  if (command.args.length > 0)
    throw new InputError(`train: unexpected argument '${command.args[0]}'`);
  const flags = parseTrainFlags(raw);
  // Before any work: an --out that cannot be written is refused now, not after loading the data.
  if (flags.out !== undefined && flags.resume === undefined)
    checkOutPath(flags.out, "folder", "--out", "train");
  const workers = resolveWorkers(flags.workers, "train");
  await useBackend(flags.backend ?? "wasm");
  // Ctrl-C: one line saying what the last checkpoint holds and how to continue it, then the
  // usual exit status of an interrupted command (130); worker threads end with the process.
  const folder = (flags.resume ?? flags.out) as string;
  const onInterrupt = () => {
    process.stderr.write(`${process.stdout.isTTY ? "\n" : ""}${interruptedLine(folder)}\n`);
    process.exit(130);
  };
  process.once("SIGINT", onInterrupt);
  const result = await trainInWorkers(trainSettings(flags, workers))
    .catch((e: unknown) => Promise.reject(initDivergence(e, flags.init)))
    .finally(() => process.off("SIGINT", onInterrupt));
  const acc = result.finalTestAccuracy;
  if (result.trainSeconds === 0) {
    const st = result.trainState;
    console.log(
      `already trained to epoch ${st.epoch}${st.epochs >= st.epoch ? ` of ${st.epochs}` : ` (--epochs ${st.epochs} asks for fewer; a run is never shortened)`}: nothing to do (pass --epochs N with N > ${st.epoch} to train on); ` +
        `test accuracy ${Number.isFinite(acc) ? (100 * acc).toFixed(2) + "%" : "n/a"}, checkpoint in ${result.out}`,
    );
    result.model.dispose();
    return;
  }
  console.log(
    `final test accuracy ${Number.isFinite(acc) ? (100 * acc).toFixed(2) + "%" : "n/a"}, ` +
      `wall time ${result.wallSeconds.toFixed(1)} s, ${result.imagesPerSecond.toFixed(1)} ${kindOfModel(result.model.config).rateUnit} (training steps), ` +
      `checkpoint in ${result.out}`,
  );
  result.model.dispose();
}
