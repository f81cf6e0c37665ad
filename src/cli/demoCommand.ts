import { Command, Option } from "commander";
import { z } from "zod";
import { InputError } from "../util/errors.ts";

interface DemoFlags {
  quick?: boolean;
  task: string;
  out?: string;
  seed: string;
  jasmin?: string;
  backend: string;
}

const Flags = z.object({
  seed: z.coerce.number().int("expected an integer").min(0, "expected an integer >= 0"),
  jasmin: z.coerce.number().finite("expected a number").min(0, "expected a number >= 0").max(100, "expected at most 100").optional(),
});

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
    .option("--out <dir>", "output folder (default runs/demo, or runs/demo-text)")
    .option("--seed <int>", "seed of data split, initialisation and attacks", "0")
    .option("--jasmin <lambda>", "JaSMin weight of the second model (default 0.1; --quick: 0.5)")
    .addOption(new Option("--backend <name>", "tfjs backend").choices(["wasm", "cpu"]).default("wasm"))
    .action(async (flags: DemoFlags) => {
      const parsed = Flags.safeParse(flags);
      if (!parsed.success) {
        const issue = parsed.error.issues[0];
        const flag = String(issue.path[0]);
        throw new InputError(`--${flag}: ${issue.message} (got "${flags[flag as keyof DemoFlags]}")`);
      }
      const { runDemo } = await import("./demoRun.ts");
      const { demoSettings } = await import("./demoSettings.ts");
      const task = flags.task as "image" | "text";
      await runDemo({
        settings: demoSettings(task, flags.quick ?? false),
        out: flags.out ?? (task === "text" ? "runs/demo-text" : "runs/demo"),
        seed: parsed.data.seed,
        jasmin: parsed.data.jasmin,
        backend: flags.backend as "wasm" | "cpu",
      });
    });
}
