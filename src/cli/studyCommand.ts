import { readFileSync } from "node:fs";
import { Command } from "commander";
import { z } from "zod";
import { BACKENDS, type BackendName } from "../backend.ts";
import { parseJsonStrict } from "../io/strictJson.ts";
import { InputError } from "../util/errors.ts";
import { firstFlagIssue, numberFlag, numberListFlag, optionWithDefault, resolveWorkers } from "./flags.ts";
import { EPOCHS } from "./trainCommand.ts";

/** Raw option strings as commander hands them over (absent = not given). */
interface RawStudyOptions {
  config?: string;
  data?: string;
  model?: string;
  lambdas?: string;
  seeds?: string;
  jasminNorm?: string;
  jasminReduce?: string;
  epochs?: string;
  trainSize?: string;
  testLimit?: string;
  batch?: string;
  lr?: string;
  pretrainEpochs?: string;
  pretrainLr?: string;
  augmentShift?: string;
  analyzeN?: string;
  iterations?: string;
  attackN?: string;
  attack?: string;
  epsLinf?: string;
  epsL2?: string;
  steps?: string;
  restarts?: string;
  shard?: string;
  shards?: string;
  workers?: string;
  backend?: string;
  aggregate?: boolean;
}

const FLAGS: Record<keyof RawStudyOptions, string> = {
  config: "--config",
  data: "--data",
  model: "--model",
  lambdas: "--lambdas",
  seeds: "--seeds",
  jasminNorm: "--jasmin-norm",
  jasminReduce: "--jasmin-reduce",
  epochs: "--epochs",
  trainSize: "--train-size",
  testLimit: "--test-limit",
  batch: "--batch",
  lr: "--lr",
  pretrainEpochs: "--pretrain-epochs",
  pretrainLr: "--pretrain-lr",
  augmentShift: "--augment-shift",
  analyzeN: "--analyze-n",
  iterations: "--iterations",
  attackN: "--attack-n",
  attack: "--attack",
  epsLinf: "--eps-linf",
  epsL2: "--eps-l2",
  steps: "--steps",
  restarts: "--restarts",
  shard: "--shard",
  shards: "--shards",
  workers: "--workers",
  backend: "--backend",
  aggregate: "--aggregate",
};

const list = z.string().transform((s) => s.split(",").map((x) => x.trim()).filter((x) => x !== ""));
const positive = numberFlag({ integer: true, min: 1 });

/** The flags as numbers and lists; the grid's own schema (study/grid.ts) checks their ranges. */
const StudyFlagsSchema = z.object({
  config: z.string().optional(),
  data: list.optional(),
  model: list.optional(),
  lambdas: numberListFlag({ min: 0 }).optional(),
  seeds: numberListFlag({ integer: true, min: 0 }).optional(),
  jasminNorm: list.optional(),
  jasminReduce: list.optional(),
  epochs: numberFlag(EPOCHS).optional(),
  trainSize: positive.optional(),
  testLimit: positive.optional(),
  batch: positive.optional(),
  lr: numberFlag({ above: 0 }).optional(),
  pretrainEpochs: numberFlag(EPOCHS).optional(),
  pretrainLr: numberFlag({ above: 0 }).optional(),
  augmentShift: numberFlag({ integer: true, min: 0, max: 1000 }).optional(),
  analyzeN: positive.optional(),
  iterations: positive.optional(),
  attackN: positive.optional(),
  attack: list.optional(),
  epsLinf: numberListFlag({ min: 0 }).optional(),
  epsL2: numberListFlag({ min: 0 }).optional(),
  steps: positive.optional(),
  restarts: positive.optional(),
  shard: z.string().optional(),
  shards: z.string().optional(),
  workers: numberFlag({ integer: true, min: 1, max: 256 }).optional(),
  backend: z.enum(BACKENDS as unknown as [BackendName, ...BackendName[]], { message: `must be one of ${BACKENDS.join(", ")}` }).optional(),
  aggregate: z.boolean().optional(),
});
type StudyFlags = z.output<typeof StudyFlagsSchema>;

/** The grid fields the flags give, nested as the grid file nests them (undefined = not given). */
function gridFromFlags(f: StudyFlags): Record<string, unknown> {
  const pick = (o: Record<string, unknown>) => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));
  return pick({
    data: f.data,
    model: f.model,
    lambdas: f.lambdas,
    seeds: f.seeds,
    jasminNorm: f.jasminNorm,
    reduce: f.jasminReduce,
    train: nonEmpty(pick({ epochs: f.epochs, trainSize: f.trainSize, testLimit: f.testLimit, batch: f.batch, lr: f.lr, pretrainEpochs: f.pretrainEpochs, pretrainLr: f.pretrainLr, augmentShift: f.augmentShift })),
    analyze: nonEmpty(pick({ n: f.analyzeN, iterations: f.iterations })),
    attack: nonEmpty(pick({ n: f.attackN, attacks: f.attack, linf: f.epsLinf, l2: f.epsL2, steps: f.steps, restarts: f.restarts })),
  });
}

const nonEmpty = (o: Record<string, unknown>) => (Object.keys(o).length > 0 ? o : undefined);

function readConfig(path: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    throw new InputError(`study: --config: cannot read ${path} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  let value: unknown;
  try {
    value = parseJsonStrict(text);
  } catch (e) {
    throw new InputError(`study: --config ${path}: not valid JSON (${(e as Error).message})`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value))
    throw new InputError(`study: --config ${path}: expected a JSON object with the grid's fields (data, model, lambdas, seeds, train, analyze, attack)`);
  return value as Record<string, unknown>;
}

/**
 * `attnlip study OUT`: a grid of independent runs (data x model x JaSMin lambda x norm x
 * reduction x seed), each trained, analysed and attacked (APGD by default, l_inf and l_2)
 * into OUT/runs/ID/, aggregated with 95% Student-t intervals over seeds into OUT/study.json
 * and study.csv. `attnlip study --aggregate OUT` only aggregates what is finished.
 */
export function studyCommand(): Command {
  return new Command("study")
    .description(
      "run a grid of train + analyze + attack runs (data x model x JaSMin lambda x seed) and aggregate them over seeds with 95% confidence intervals; resumable, shardable",
    )
    .argument("[out]", "the study folder (created; an existing one is continued with its own grid)")
    .option("--config <file>", "a JSON file with the grid (fields: data, model, lambdas, seeds, jasminNorm, reduce, train, analyze, attack; flags override it)")
    .addOption(optionWithDefault("--data <list>", "data specs, comma-separated", "mnist"))
    .addOption(optionWithDefault("--model <list>", "model presets, comma-separated", "vit-tiny"))
    .addOption(optionWithDefault("--lambdas <list>", "JaSMin weights, comma-separated; include 0 for paired differences", "0,0.1"))
    .addOption(optionWithDefault("--seeds <list>", "seeds, comma-separated", "0,1,2"))
    .addOption(optionWithDefault("--jasmin-norm <list>", "JaSMin's per-row sigma: top2, quad, exact", "top2"))
    .addOption(optionWithDefault("--jasmin-reduce <list>", "JaSMin's reduction: max-log, max, mean", "max-log"))
    .addOption(optionWithDefault("--epochs <n>", "training epochs per run (with --pretrain-epochs: fine-tuning epochs)", "2"))
    .addOption(optionWithDefault("--train-size <n>", "training examples per run (the first of the split)", "all"))
    .addOption(optionWithDefault("--test-limit <n>", "test examples behind the clean accuracy (quick checks; a study should use all)", "all"))
    .addOption(optionWithDefault("--batch <n>", "examples per training step", "32"))
    .addOption(optionWithDefault("--lr <x>", "peak learning rate (with --pretrain-epochs: of the fine-tuning)", "0.002"))
    .addOption(optionWithDefault("--pretrain-epochs <n>", "train one model per data, model and seed without JaSMin for n epochs (OUT/pretrain/), then each run fine-tunes its seed's model for --epochs with its lambda", "off: each run trains from scratch"))
    .addOption(optionWithDefault("--pretrain-lr <x>", "peak learning rate of the pretraining", "0.002"))
    .addOption(optionWithDefault("--augment-shift <pixels>", "image data: random shifts of the training images, at most this many pixels each way (train --augment-shift)", "0: off"))
    .addOption(optionWithDefault("--analyze-n <n>", "test inputs analysed per run (bounds and true values)", "100"))
    .addOption(optionWithDefault("--iterations <n>", "iteration limit of the block true values (Lanczos, products with Df^T Df)", "50"))
    .addOption(optionWithDefault("--attack-n <n>", "test inputs attacked per run", "500"))
    .addOption(optionWithDefault("--attack <list>", "attacks, comma-separated (apgd, pgd, fgsm)", "apgd"))
    .addOption(optionWithDefault("--eps-linf <list>", "l_inf radii", "images: 0,0.05,0.1,0.2; text: 0,0.001,0.002,0.005"))
    .addOption(optionWithDefault("--eps-l2 <list>", "l_2 radii", "images: 0,0.5,1,2; text: 0,0.05,0.1,0.25"))
    .addOption(optionWithDefault("--steps <n>", "attack steps per run", "20"))
    .addOption(optionWithDefault("--restarts <n>", "APGD restarts", "1"))
    .addOption(optionWithDefault("--shard <k/n>", "run only every n-th run starting with the k-th (a job array sharing OUT)", "from SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX when set, else 1/1: every run"))
    .addOption(optionWithDefault("--shards <n>", "shards of a job array whose index the scheduler sets (needed with Kubernetes' JOB_COMPLETION_INDEX; Slurm's SLURM_ARRAY_TASK_COUNT otherwise)", "the array's size"))
    .addOption(optionWithDefault("--workers <int>", "worker threads of each run's training, analysis and attacks", "the number of cores"))
    .addOption(optionWithDefault("--backend <name>", "tfjs backend: wasm or cpu", "wasm"))
    .option("--aggregate", "only combine the finished runs of OUT into study.json and study.csv")
    .action(async (out: string | undefined, raw: RawStudyOptions) => {
      const parsed = StudyFlagsSchema.safeParse(raw);
      if (!parsed.success) throw firstFlagIssue("study", parsed.error, raw, FLAGS);
      const flags = parsed.data;
      if (out === undefined || out.trim() === "")
        throw new InputError("study: give the study folder, e.g. attnlip study runs/study --model vit-tiny --lambdas 0,0.1 --seeds 0,1,2");
      const { aggregateStudyFolder, isStudyFolder, runStudy } = await import("../pipelines/studyRun.ts");
      const { studyTable } = await import("../study/table.ts");
      if (flags.aggregate === true) {
        const given = (Object.keys(raw) as (keyof RawStudyOptions)[]).find((k) => k !== "aggregate" && raw[k] !== undefined);
        if (given !== undefined) throw new InputError(`study: ${FLAGS[given]} cannot be given with --aggregate (it only combines finished runs)`);
        const summary = await aggregateStudyFolder(out);
        console.log(studyTable(summary));
        console.log(`aggregated ${summary.finished} finished run(s)${summary.unfinished.length > 0 ? ` (${summary.unfinished.length} unfinished left out)` : ""} into ${out}/study.json and study.csv`);
        return;
      }
      const { mergeGridInput } = await import("../study/grid.ts");
      const { shardFromScheduler } = await import("../study/schedulerShard.ts");
      const chosen = shardFromScheduler(flags);
      if (chosen !== null && chosen.from !== "--shard") console.error(`study: shard ${chosen.k}/${chosen.n} (${chosen.from})`);
      const shard = chosen === null ? undefined : { k: chosen.k, n: chosen.n };
      const fromFlags = gridFromFlags(flags);
      const gridGiven = flags.config !== undefined || Object.keys(fromFlags).length > 0;
      const grid = gridGiven ? mergeGridInput(flags.config !== undefined ? readConfig(flags.config) : {}, fromFlags) : undefined;
      const train = grid?.train as Record<string, unknown> | undefined;
      if (train?.pretrainLr !== undefined && train.pretrainEpochs === undefined && !isStudyFolder(out))
        throw new InputError("study: train.pretrainLr (--pretrain-lr) applies only to a study that pretrains: give train.pretrainEpochs (--pretrain-epochs) too");
      const workers = resolveWorkers(flags.workers, "study");
      const where = flags.config !== undefined ? `study: --config ${flags.config}` : "study";
      const summary = await runStudy({ out, grid, where, shard, backend: flags.backend ?? "wasm", workers });
      console.log(studyTable(summary));
    });
}
