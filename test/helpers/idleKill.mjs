// Runs a command with its output passed through, and kills it only when it has printed nothing
// for IDLE_MS (test/helpers/patience.ts: time limits catch hangs, not slowness): then one line on
// stderr names LABEL (the command and its folder) and the wait. The exit code (or the signal)
// is the command's. spawnSync cannot watch output as it comes, so runAttnlip starts this script.
//
// Usage: node idleKill.mjs IDLE_MS LABEL COMMAND [ARGS...]
import { spawn } from "node:child_process";
import { clearTimeout, setTimeout } from "node:timers";

const [idleMs, label, command, ...args] = process.argv.slice(2);
const child = spawn(command, args, { stdio: ["inherit", "pipe", "pipe"] });
let timer;
const arm = () => {
  clearTimeout(timer);
  timer = setTimeout(() => {
    process.stderr.write(
      `\nidleKill: ${label} printed nothing for ${Number(idleMs) / 1000} s and was killed as hung\n`,
    );
    child.kill("SIGKILL");
  }, Number(idleMs));
};
arm();
child.stdout.on("data", (chunk) => {
  process.stdout.write(chunk);
  arm();
});
child.stderr.on("data", (chunk) => {
  process.stderr.write(chunk);
  arm();
});
child.on("close", (code, signal) => {
  clearTimeout(timer);
  if (signal !== null) process.kill(process.pid, signal);
  else process.exitCode = code ?? 1;
});
