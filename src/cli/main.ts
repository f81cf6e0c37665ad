import { oneLine } from "../util/errors.ts";
import { runCli } from "./program.ts";

/** The `attnlip` command: runs the command line (src/cli/program.ts) on this process's argv. */

// A closed pipe (`attnlip ... | head`) is a normal end, not an error; other write failures
// (a full disk) get one line and exit code 1, never a stack trace.
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code === "EPIPE") process.exit(0);
  process.stderr.write(`attnlip: cannot write output: ${oneLine(error)}\n`);
  process.exit(1);
});

process.exitCode = await runCli(process.argv);
