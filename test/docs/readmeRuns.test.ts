// README's command blocks run, in the order README gives them, in a fresh folder: every line of
// every ```sh block succeeds, so a newcomer who types README from top to bottom meets no error.
//
// To take seconds instead of hours, each attnlip command is shrunk by the fixed rules of
// `shrink` below (the issue asked for the `vit-micro` preset): vit-tiny becomes vit-micro and text-tiny text-micro,
// epochs are divided by 3 (rounded up, so 3 -> 1 and an extension to 5 -> 2 still extends),
// new trainings use at most 64 training and 32 test examples (a --resume or --init run keeps its
// base's), analyses and attacks at most 2
// inputs, the study 2 lambdas x 2 seeds of tiny runs, and `npm start` is `attnlip demo --quick
// --out runs/demo`;
// an `explore` that would serve the page until Ctrl-C writes it to a folder (--out) instead.
// Flags, folders and the order of the commands are README's own: a command that names a folder
// an earlier line did not write, a flag that was renamed, or two runs that `report` refuses to
// compare fail here. `npm ci` and `npm test` (this suite) are not run; other shell lines (a file
// written with printf) run in bash. The commands run in this process (runAttnlipHere), with the
// repository's test/ folder linked into the temporary folder for README's fixture paths.
//
// No fixed time limit (it took 63 s alone and 252 s at load 15): a line that prints nothing and
// does not finish for HANG_MS (test/helpers/patience.ts) fails the test with the README line,
// the command it ran as and the folder.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { runAttnlipHere } from "../helpers/cli.ts";
import { readmeShellLines } from "../helpers/readme.ts";
import { HANG_MS, watchdog } from "../helpers/patience.ts";

const root = fileURLToPath(new URL("../..", import.meta.url));

/** Sets `flag` to `value` in args (replacing its value, or appending the pair). */
function setFlag(args: string[], flag: string, value: string): void {
  const i = args.indexOf(flag);
  if (i >= 0) args[i + 1] = value;
  else args.push(flag, value);
}

/** Applies `f` to the value of `flag` when present. */
function mapFlag(args: string[], flag: string, f: (value: string) => string): void {
  const i = args.indexOf(flag);
  if (i >= 0) args[i + 1] = f(args[i + 1]);
}

const atMost = (cap: number) => (v: string) => String(Math.min(Number(v), cap));

/** The shrunk arguments of one README `npx attnlip` command (see the rules at the top). */
function shrink(args: string[]): string[] {
  const out = [...args];
  const command = out[0];
  mapFlag(out, "--model", (m) => ({ "vit-tiny": "vit-micro", "text-tiny": "text-micro" })[m] ?? m);
  mapFlag(out, "--epochs", (e) => String(Math.ceil(Number(e) / 3)));
  mapFlag(out, "--n", atMost(2));
  if (command === "train" && !out.includes("--resume") && !out.includes("--init")) {
    setFlag(
      out,
      "--limit",
      out.includes("--limit") ? atMost(64)(out[out.indexOf("--limit") + 1]) : "64",
    );
    setFlag(out, "--test-limit", "32");
  }
  if (command === "study") {
    mapFlag(out, "--lambdas", (l) => [l.split(",")[0], l.split(",").at(-1)].join(","));
    mapFlag(out, "--seeds", (s) => s.split(",").slice(0, 2).join(","));
    setFlag(out, "--analyze-n", "2");
    setFlag(out, "--attack-n", "4");
    setFlag(out, "--train-size", "64");
    setFlag(out, "--test-limit", "32");
    setFlag(out, "--iterations", "10");
    setFlag(out, "--steps", "2");
  }
  if (command === "explore" && !out.includes("--out")) setFlag(out, "--out", `served-${++served}`);
  return out;
}
let served = 0;

test("README's command blocks run in order (shrunk to vit-micro sizes) without an error", async () => {
  const lines = readmeShellLines();
  assert.ok(
    lines.filter((l) => l.startsWith("npx attnlip ")).length >= 20,
    "README's attnlip commands were not found",
  );
  const dir = mkdtempSync(join(tmpdir(), "attnlip-readme-"));
  symlinkSync(join(root, "test"), join(dir, "test"));
  try {
    for (const [k, line] of lines.entries()) {
      const where = `README shell line ${k + 1} of ${lines.length}, in ${dir}: ${line}`;
      if (line === "npm ci" || line === "npm test") continue;
      let args: string[];
      // The quick demo writes runs/demo-quick; README's later lines read npm start's runs/demo.
      if (line === "npm start") args = ["demo", "--quick", "--out", "runs/demo"];
      else if (line.startsWith("npx attnlip ")) {
        assert.doesNotMatch(
          line,
          /["'`$]/,
          `README line needs a shell, which this test does not run for attnlip: ${line}`,
        );
        args = shrink(line.slice("npx attnlip ".length).split(/\s+/));
      } else {
        assert.doesNotMatch(line, /^(npm|npx|node)\b/, `README line this test cannot run: ${line}`);
        try {
          execFileSync("bash", ["-c", line], { cwd: dir, timeout: HANG_MS });
        } catch (e) {
          throw new Error(`${where}: ${(e as Error).message}`);
        }
        continue;
      }
      const dog = watchdog(
        (seconds) =>
          `${where}\n(run as: attnlip ${args.join(" ")}) printed nothing and did not finish for ${seconds} s: taken as hung`,
      );
      let result: Awaited<ReturnType<typeof runAttnlipHere>>;
      try {
        result = await Promise.race([
          runAttnlipHere(args, { cwd: dir, onOutput: dog.progress }),
          dog.hung,
        ]);
      } finally {
        dog.stop();
      }
      assert.equal(
        result.code,
        0,
        `README line failed: ${line}\n(run as: attnlip ${args.join(" ")})\n${result.stderr}`,
      );
    }
    // What the last lines promise is there.
    for (const file of [
      "runs/demo/report.html",
      "runs/base/analysis.json",
      "runs/jasmin/attack.json",
      "report.html",
      "study.html",
    ])
      assert.ok(existsSync(join(dir, file)), `${file} was not written`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
