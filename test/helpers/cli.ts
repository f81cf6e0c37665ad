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

/**
 * Runs the CLI in this process, without the start-up of a new one (about 2 s each): for inputs
 * the CLI refuses before doing any work. process.stdout / process.stderr writes (console
 * included) are captured while it runs.
 */
export async function runAttnlipHere(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const { runCli } = await import("../../src/cli/program.ts");
  let stdout = "";
  let stderr = "";
  const writeOut = process.stdout.write;
  const writeErr = process.stderr.write;
  process.stdout.write = ((chunk: string | Uint8Array) => ((stdout += String(chunk)), true)) as typeof process.stdout.write;
  process.stderr.write = ((chunk: string | Uint8Array) => ((stderr += String(chunk)), true)) as typeof process.stderr.write;
  try {
    const code = await runCli([process.execPath, "attnlip", ...args]);
    return { code, stdout, stderr };
  } finally {
    process.stdout.write = writeOut;
    process.stderr.write = writeErr;
  }
}
