import { createRequire } from "node:module";
import { Command, CommanderError } from "commander";
import { sigmaCommand } from "./sigmaCommand.ts";
import { demoCommand } from "./demoCommand.ts";
import { analyzeCommand } from "./analyzeCommand.ts";
import { trainCommand } from "./trainCommand.ts";
import { attackCommand } from "./attackCommand.ts";
import { reportCommand } from "./reportCommand.ts";
import { exportCommand } from "./exportCommand.ts";
import { studyCommand } from "./studyCommand.ts";
import { exploreCommand } from "./exploreCommand.ts";
import { radiusCommand } from "./radiusCommand.ts";
import { certifyCommand } from "./certifyCommand.ts";
import { isInputProblem, oneLine } from "../util/errors.ts";
import { showDescribedDefaults } from "./flags.ts";

/** package.json's version (src/cli/ and the built dist/cli/ both sit two folders below it). */
function packageVersion(): string {
  return (createRequire(import.meta.url)("../../package.json") as { version: string }).version;
}

/**
 * The `attnlip` command line. Exit codes: 0 success, 2 bad input (one line on stderr),
 * 1 internal error (one line; ATTNLIP_DEBUG=1 prints the stack).
 */
export function buildProgram(): Command {
  const program = new Command("attnlip")
    .description(
      "Local Lipschitz bounds of transformers from their attention distributions (arXiv:2507.07814), JaSMin training and robustness evaluation",
    )
    .version(packageVersion())
    .showHelpAfterError(false)
    .exitOverride();
  program.addCommand(demoCommand());
  program.addCommand(sigmaCommand());
  program.addCommand(trainCommand());
  program.addCommand(analyzeCommand());
  program.addCommand(attackCommand());
  program.addCommand(reportCommand());
  program.addCommand(exportCommand());
  program.addCommand(studyCommand());
  program.addCommand(exploreCommand());
  program.addCommand(radiusCommand());
  program.addCommand(certifyCommand());
  for (const command of [program, ...program.commands])
    command
      .exitOverride()
      .configureOutput({ outputError: writeOneLine })
      .configureHelp(showDescribedDefaults());
  return program;
}

/**
 * commander prints usage errors as "error: ..." over several lines; keep one line, with its
 * "(Did you mean ...?)" suggestion for a mistyped command or option when it made one.
 */
function writeOneLine(text: string, write: (s: string) => void): void {
  const lines = text.split("\n").map((l) => l.trim());
  const hint = lines.slice(1).find((l) => l.startsWith("(Did you mean"));
  write(`attnlip: ${lines[0].replace(/^error: /, "")}${hint === undefined ? "" : ` ${hint}`}\n`);
}

/**
 * `attnlip help NAME` for a NAME that is no command: commander prints the program's help and
 * exits 0, so a typo looked like success; refused here with one line naming it (exit 2).
 *
 * @param args argv after the program name, e.g. ["help", "nosuch"].
 * @throws CommanderError (code "commander.unknownCommand", exit code 2) after printing
 *   `attnlip: help: unknown command 'nosuch' (commands: demo, sigma, ...)`.
 */
function checkHelpTopic(program: Command, args: readonly string[]): void {
  const [first, topic] = args;
  if (first !== "help" || topic === undefined || topic === "help" || topic.startsWith("-")) return;
  const names = program.commands.map((c) => c.name());
  if (program.commands.some((c) => c.name() === topic || c.aliases().includes(topic))) return;
  program.error(`help: unknown command '${topic}' (commands: ${names.join(", ")})`, {
    code: "commander.unknownCommand",
    exitCode: 2,
  });
}

/** Runs the CLI on argv and returns the exit code. */
export async function runCli(argv: string[]): Promise<number> {
  const program = buildProgram();
  if (argv.length <= 2) {
    program.outputHelp();
    return 0;
  }
  try {
    checkHelpTopic(program, argv.slice(2));
    await program.parseAsync(argv);
    return 0;
  } catch (error) {
    if (error instanceof CommanderError) {
      if (
        error.code === "commander.helpDisplayed" ||
        error.code === "commander.version" ||
        error.code === "commander.help"
      )
        return 0;
      return 2; // commander already printed its one-line message
    }
    if (isInputProblem(error)) {
      console.error(`attnlip: ${oneLine(error)}`);
      return 2;
    }
    console.error(`attnlip: internal error: ${oneLine(error)}`);
    if (process.env.ATTNLIP_DEBUG) console.error(error);
    return 1;
  }
}
