import { Command } from "commander";
import { InputError } from "../util/errors.ts";
import { checkOutPath, refuseToReplace } from "../io/outPath.ts";
import { optionWithDefault } from "./flags.ts";

interface ReportFlags {
  out?: string;
  names?: string;
  title?: string;
  allowMixed?: boolean;
  force?: boolean;
}

/**
 * `attnlip report DIR_A [DIR_B] --out report.html`: one self-contained HTML file comparing one
 * or two runs (each folder holds analysis.json, and optionally attack.json, metrics.jsonl,
 * config.json and train_state.json). `attnlip report STUDY_DIR --out study.html`: the report
 * of a study folder (report/study.ts).
 */
export function reportCommand(): Command {
  return new Command("report")
    .description(
      "self-contained HTML report (inline SVG charts, no scripts) comparing one or two run folders",
    )
    .argument(
      "[runA]",
      "run folder with analysis.json (or analysis/analysis.json), or a study folder (attnlip study)",
    )
    .argument("[runB]", "a second run folder to compare with (e.g. baseline vs JaSMin)")
    .option("--out <file>", "the HTML file to write (required)")
    .addOption(optionWithDefault("--names <a,b>", "names shown for the runs", "the folder names"))
    .addOption(
      optionWithDefault(
        "--title <text>",
        "title of the report",
        "attnlip report: A vs B, with the run names; for a study: attnlip study: JaSMin lambda against accuracy, robustness and Lipschitz constants",
      ),
    )
    .option("--force", "replace an existing --out file (without it, an existing one is refused)")
    .option(
      "--allow-mixed",
      "draw two runs attacked differently (norm, radii, attacks, inputs, steps) on one chart, listing the differences (without it, such runs are refused)",
    )
    .action(async (runA: string | undefined, runB: string | undefined, flags: ReportFlags) => {
      // Checked here, not by the parser, so that a bare `report` says what to pass first.
      if (runA === undefined)
        throw new InputError(
          "report: give one or two run folders (each with analysis.json and/or attack.json) and --out FILE, e.g. attnlip report runs/demo/baseline runs/demo/jasmin --out report.html",
        );
      if (flags.out === undefined)
        throw new InputError(
          `report: --out FILE: where to write the HTML report, e.g. attnlip report ${[runA, runB].filter(Boolean).join(" ")} --out report.html`,
        );
      const out = flags.out;
      // Before any work: an --out that cannot be written is refused now, not after the charts.
      checkOutPath(out, "file", "--out", "report");
      const { isStudyFolder } = await import("../pipelines/studyRun.ts");
      if (isStudyFolder(runA)) {
        if (runB !== undefined)
          throw new InputError(
            `report: ${runA} is a study folder: report it alone (its runs are already compared inside)`,
          );
        if (flags.names !== undefined || flags.allowMixed === true)
          throw new InputError(
            "report: --names and --allow-mixed apply to run folders, not to a study folder",
          );
        refuseToReplace([out], flags.force === true, "report", "FILE");
        const { aggregateStudy } = await import("../study/aggregate.ts");
        const { buildStudyReport } = await import("../report/study.ts");
        const { writeReport } = await import("../report/report.ts");
        const html = await buildStudyReport(await aggregateStudy(runA), {
          title: flags.title,
          dir: runA,
        });
        await writeReport(out, html);
        console.log(
          `wrote ${out} (study report, ${(Buffer.byteLength(html) / 1024).toFixed(0)} KiB)`,
        );
        return;
      }
      const dirs = runB === undefined ? [runA] : [runA, runB];
      let names: string[] | undefined;
      if (flags.names !== undefined) {
        names = flags.names.split(",").map((n) => n.trim());
        if (names.length !== dirs.length)
          throw new InputError(
            `--names: expected ${dirs.length} name${dirs.length > 1 ? "s" : ""} (one per run), got ${names.length}`,
          );
        if (names.some((n) => n === "")) throw new InputError("--names: a name is empty");
        if (new Set(names).size !== names.length)
          throw new InputError("--names: the names must differ");
      }
      if (flags.title !== undefined && flags.title.trim() === "")
        throw new InputError("--title: empty title");
      refuseToReplace([out], flags.force === true, "report", "FILE");
      const { buildReport, writeReport } = await import("../report/report.ts");
      const html = await buildReport(
        dirs.map((dir, i) => ({ dir, name: names?.[i] })),
        {
          title: flags.title,
          allowMixed: flags.allowMixed === true,
          onWarning: (line) => console.error(`report: warning: ${line}`),
        },
      );
      await writeReport(out, html);
      console.log(`wrote ${flags.out} (${(Buffer.byteLength(html) / 1024).toFixed(0)} KiB)`);
    });
}
