import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const bin = fileURLToPath(new URL("../../bin/attnlip.js", import.meta.url));

/** Runs the attnlip CLI as a user would, returning exit code and both output streams. */
export function runAttnlip(args: string[], options: { cwd?: string; timeoutMs?: number; env?: Record<string, string> } = {}) {
  const result = spawnSync(process.execPath, [bin, ...args], {
    encoding: "utf8",
    cwd: options.cwd,
    env: options.env === undefined ? undefined : { ...process.env, ...options.env },
    timeout: options.timeoutMs ?? 120_000,
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}
