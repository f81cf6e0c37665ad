import { oneLine } from "../util/errors.ts";
import { runCli } from "./program.ts";
import { enableWeightCache } from "../analysis/weightCacheStore.ts";

/** The `attnlip` command: runs the command line (src/cli/program.ts) on this process's argv. */

// A closed pipe (`attnlip ... | head`) is a normal end, not an error; other write failures
// (a full disk) get one line and exit code 1, never a stack trace.
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code === "EPIPE") process.exit(0);
  process.stderr.write(`attnlip: cannot write output: ${oneLine(error)}\n`);
  process.exit(1);
});

// Weight-only norms (spectral norms of the weight matrices) are computed once per checkpoint and
// read back from node_modules/.cache/attnlip/weights/ afterwards (src/analysis/weightCacheStore.ts).
enableWeightCache();

process.exitCode = await runCli(process.argv);
