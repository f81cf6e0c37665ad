import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { HANG_MS, watchdog } from "./patience.ts";

const bin = fileURLToPath(new URL("../../bin/attnlip.js", import.meta.url));
const idleKill = fileURLToPath(new URL("./idleKill.mjs", import.meta.url));

/**
 * Runs the attnlip CLI as a user would, returning exit code and both output streams. No fixed
 * time limit: the command is killed only when it prints nothing for `idleMs` [HANG_MS, 10
 * minutes], and then stderr's last line names the command and its folder (code null).
 */
export function runAttnlip(
  args: string[],
  options: { cwd?: string; idleMs?: number; env?: Record<string, string> } = {},
) {
  const label = `"attnlip ${args.join(" ")}" (in ${options.cwd ?? process.cwd()})`;
  const result = spawnSync(
    process.execPath,
    [idleKill, String(options.idleMs ?? HANG_MS), label, process.execPath, bin, ...args],
    {
      encoding: "utf8",
      cwd: options.cwd,
      env: options.env === undefined ? undefined : { ...process.env, ...options.env },
      maxBuffer: 64 * 1024 * 1024,
    },
  );
  if (result.error !== undefined)
    throw new Error(`runAttnlip: cannot run ${label}: ${result.error.message}`);
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

/**
 * Runs the CLI in this process, without the start-up of a new one (about 2 s each): for inputs
 * the CLI refuses before doing any work. process.stdout / process.stderr writes (console
 * included) are captured while it runs; `cwd` is the working directory and `env` is added to
 * (a value undefined: removed from) process.env during the run.
 */
export async function runAttnlipHere(
  args: string[],
  options: {
    cwd?: string;
    env?: Record<string, string | undefined>;
    /** Called on every write to stdout or stderr (a sign of progress, test/helpers/patience.ts). */
    onOutput?: () => void;
  } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const { runCli } = await import("../../src/cli/program.ts");
  let stdout = "";
  let stderr = "";
  const writeOut = process.stdout.write;
  const writeErr = process.stderr.write;
  // Only strings are captured: the CLI writes strings, while node:test sends this file's results
  // to the runner as Buffers on this process's stdout, which must pass through untouched (or a
  // report line of a neighbouring test would be lost).
  const capture = (
    stream: NodeJS.WriteStream,
    write: typeof process.stdout.write,
    add: (s: string) => void,
  ) =>
    ((chunk: string | Uint8Array, ...rest: unknown[]) => {
      if (typeof chunk === "string") return (add(chunk), true);
      return (write as (...a: unknown[]) => boolean).call(stream, chunk, ...rest);
    }) as typeof process.stdout.write;
  const onOutput = options.onOutput ?? (() => {});
  process.stdout.write = capture(process.stdout, writeOut, (s) => ((stdout += s), onOutput()));
  process.stderr.write = capture(process.stderr, writeErr, (s) => ((stderr += s), onOutput()));
  const cwd = process.cwd();
  const savedEnv = Object.fromEntries(
    Object.keys(options.env ?? {}).map((k) => [k, process.env[k]]),
  );
  const setEnv = (values: Record<string, string | undefined>) => {
    for (const [k, v] of Object.entries(values))
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
  };
  try {
    setEnv(options.env ?? {});
    if (options.cwd !== undefined) process.chdir(options.cwd);
    const code = await runCli([process.execPath, "attnlip", ...args]);
    return { code, stdout, stderr };
  } finally {
    process.stdout.write = writeOut;
    process.stderr.write = writeErr;
    process.chdir(cwd);
    setEnv(savedEnv);
  }
}

/** A running attnlip command ({@link startAttnlip}). */
export interface RunningAttnlip {
  child: ChildProcess;
  /** Everything printed so far (updated as the command prints). */
  io: { stdout: string; stderr: string };
  /** Resolves with the exit code and signal. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /**
   * Resolves once stdout matches `pattern`; rejects when the command exits first, or prints
   * nothing for HANG_MS (test/helpers/patience.ts), naming `what`.
   */
  waitFor(pattern: RegExp): Promise<void>;
}

/**
 * Starts the attnlip CLI in the background (stdout and stderr piped and collected), for tests
 * that act while it runs (e.g. send Ctrl-C once a line appears).
 *
 * @param what names the command in failures, e.g. "train (out /tmp/x/run)".
 * @example const run = startAttnlip(["train", ...], "train"); await run.waitFor(/step 1\//); run.child.kill("SIGINT");
 */
export function startAttnlip(args: string[], what: string): RunningAttnlip {
  const child = spawn(process.execPath, [bin, ...args], { stdio: ["ignore", "pipe", "pipe"] });
  const io = { stdout: "", stderr: "" };
  child.stdout!.on("data", (d) => (io.stdout += d));
  child.stderr!.on("data", (d) => (io.stderr += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on("exit", (code, signal) => resolve({ code, signal })),
  );
  const waitFor = async (pattern: RegExp) => {
    const dog = watchdog((s) => `${what} printed nothing for ${s} s; stderr: ${io.stderr}`);
    const onData = () => dog.progress();
    child.stdout!.on("data", onData);
    child.stderr!.on("data", onData);
    try {
      await Promise.race([
        dog.hung,
        new Promise<void>((resolve, reject) => {
          const check = () => {
            if (pattern.test(io.stdout)) resolve();
          };
          child.stdout!.on("data", check);
          check();
          child.on("exit", () => reject(new Error(`${what} exited early: ${io.stderr}`)));
        }),
      ]);
    } finally {
      dog.stop();
      child.stdout!.off("data", onData);
      child.stderr!.off("data", onData);
    }
  };
  return { child, io, exited, waitFor };
}
