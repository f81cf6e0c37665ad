import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const bin = fileURLToPath(new URL("../../bin/attnlip.js", import.meta.url));

/** Runs the attnlip CLI as a user would, returning exit code and both output streams. */
export function runAttnlip(args: string[], options: { cwd?: string; timeoutMs?: number } = {}) {
  const result = spawnSync(process.execPath, [bin, ...args], {
    encoding: "utf8",
    cwd: options.cwd,
    timeout: options.timeoutMs ?? 120_000,
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}
