import { Command, Option } from "commander";
import { optionWithDefault, resolveWorkers } from "./flags.ts";
import { parseNumberFlag, type NumberRule } from "../util/numberFlag.ts";

interface DemoFlags {
  quick?: boolean;
  task: string;
  out?: string;
  force?: boolean;
  seed: string;
  jasmin?: string;
  backend: string;
  workers?: string;
}

/** The numeric flags' limits (the words of their errors come from util/numberFlag.ts). */
const RULES = {
  seed: { integer: true, min: 0, max: 0xffffffff },
  jasmin: { min: 0, max: 100 },
  workers: { integer: true, min: 1, max: 256 },
} satisfies Record<string, NumberRule>;

/**
 * The demo command's numeric flags as numbers.
 *
 * @throws InputError `demo: --seed: must be an integer from 0 to 4294967295, got "abc"` (the
 *   one wording of every command's numeric flags).
 */
export function parseDemoNumbers(flags: Pick<DemoFlags, "seed" | "jasmin" | "workers">): { seed: number; jasmin?: number; workers?: number } {
  return {
    seed: parseNumberFlag(flags.seed, "--seed", RULES.seed, "demo"),
    jasmin: flags.jasmin === undefined ? undefined : parseNumberFlag(flags.jasmin, "--jasmin", RULES.jasmin, "demo"),
    workers: flags.workers === undefined ? undefined : parseNumberFlag(flags.workers, "--workers", RULES.workers, "demo"),
  };
}

/**
 * `attnlip demo`: the main job (what `npm start` runs): train vit-tiny without and with
 * JaSMin on the embedded MNIST digits, analyse and attack both, write the report.
 */
export function demoCommand(): Command {
  return new Command("demo")
    .description(
      "the main job: train vit-tiny on embedded MNIST without and with JaSMin, compare local Lipschitz bounds, true values and robust accuracy, write an HTML report",
    )
    .addOption(
      new Option("--task <task>", "image: vit-tiny on embedded MNIST; text: text-tiny on the SpamAssassin corpus")
        .choices(["image", "text"])
        .default("image"),
    )
    .option("--quick", "a tiny version (tiny model, 256 examples, one epoch) that runs in well under a minute")
    .addOption(optionWithDefault("--out <dir>", "output folder", "runs/demo; --quick: runs/demo-quick; --task text: runs/demo-text, runs/demo-text-quick"))
    .option("--force", "replace the demo's results already in --out (baseline/ and jasmin/ are deleted whole, with anything kept inside them; report.html, summary.json and demo.json are replaced); without it they are kept, except an earlier demo's with the same settings in the default folder")
    .option("--seed <int>", "seed of data split, initialisation and attacks", "0")
    .addOption(optionWithDefault("--jasmin <lambda>", "JaSMin weight of the second model", "0.1; --quick: 0.5"))
    .addOption(new Option("--backend <name>", "tfjs backend: wasm or cpu").choices(["wasm", "cpu"]).default("wasm"))
    .addOption(optionWithDefault("--workers <int>", "worker threads for training, analysis and attacks (1: this thread only)", "the number of cores"))
    .action(async (flags: DemoFlags) => {
      const numbers = parseDemoNumbers(flags);
      const workers = resolveWorkers(numbers.workers, "demo");
      const { runDemo } = await import("../pipelines/demoRun.ts");
      const { demoSettings } = await import("../pipelines/demoSettings.ts");
      const { defaultDemoOut } = await import("../pipelines/demoOut.ts");
      const task = flags.task as "image" | "text";
      const quick = flags.quick ?? false;
      await runDemo({
        settings: demoSettings(task, quick),
        out: flags.out ?? defaultDemoOut(task, quick),
        ownFolder: flags.out === undefined,
        force: flags.force === true,
        seed: numbers.seed,
        jasmin: numbers.jasmin,
        backend: flags.backend as "wasm" | "cpu",
        workers,
      });
    });
}
