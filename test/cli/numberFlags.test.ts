// One wording for a bad number on the command line, in every command: `COMMAND: FLAG: must be
// WHAT, got "TEXT"` (src/util/numberFlag.ts), never the validation library's own text
// ("Invalid input: expected number, received NaN", "expected int, received number",
// "Too big: expected number to be <=10000").
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAnalyzeNumbers } from "../../src/cli/analyzeCommand.ts";
import { parseAttackFlags } from "../../src/cli/attackCommand.ts";
import { parseDemoNumbers } from "../../src/cli/demoCommand.ts";
import { parseTrainFlags } from "../../src/cli/trainCommand.ts";
import { InputError } from "../../src/util/errors.ts";
import { describeNumberRule, parseNumberFlag } from "../../src/util/numberFlag.ts";
import { runAttnlipHere } from "../helpers/cli.ts";

const bin = fileURLToPath(new URL("../../bin/attnlip.js", import.meta.url));

/** Words of a validation library, not of this program. */
const JARGON = /Invalid input|expected int|expected number|received|Too big|Too small|ZodError/i;

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** The one form, for a flag of a command and the text given. */
const form = (command: string, flag: string, text: string) =>
  new RegExp(`^${command}: ${escape(flag)}: must be [^\\n]+, got ${escape(JSON.stringify(text))}$`);

/** Not a finite decimal number (or negative, which no numeric flag takes): refused by every flag. */
const ALWAYS_BAD = ["abc", "", " ", "NaN", "Infinity", "-Infinity", "1e400", "-1e400", "0x10", "1e", "-1"];

/** Flags by command: how to parse one value, and the values refused beyond ALWAYS_BAD. */
const FLAGS: [string, string, (text: string) => unknown, string[]][] = [
  ["analyze", "--n", (t) => parseAnalyzeNumbers({ seed: "0", n: t, iterations: "1000" }), ["0", "1.5", "1e12", "10001"]],
  ["analyze", "--seed", (t) => parseAnalyzeNumbers({ seed: t, n: "16", iterations: "1000" }), ["1.5", "1e12"]],
  ["analyze", "--iterations", (t) => parseAnalyzeNumbers({ seed: "0", n: "16", iterations: t }), ["0", "1.5", "1e12"]],
  ["attack", "--eps", (t) => parseAttackFlags({ eps: t }), ["0.1,abc"]],
  ["attack", "--steps", (t) => parseAttackFlags({ steps: t }), ["0", "1.5", "1e12"]],
  ["attack", "--step-size", (t) => parseAttackFlags({ stepSize: t }), ["0"]],
  ["attack", "--n", (t) => parseAttackFlags({ n: t }), ["0", "1.5", "1e12"]],
  ["attack", "--batch", (t) => parseAttackFlags({ batch: t }), ["0", "2.5", "1e12"]],
  ["attack", "--seed", (t) => parseAttackFlags({ seed: t }), ["1.5", "1e12"]],
  ["train", "--epochs", (t) => parseTrainFlags({ out: "x", epochs: t }), ["0", "1.5"]],
  ["train", "--batch", (t) => parseTrainFlags({ out: "x", batch: t }), ["0", "1.5"]],
  ["train", "--lr", (t) => parseTrainFlags({ out: "x", lr: t }), ["0"]],
  ["train", "--min-lr", (t) => parseTrainFlags({ out: "x", minLr: t }), []],
  ["train", "--weight-decay", (t) => parseTrainFlags({ out: "x", weightDecay: t }), []],
  ["train", "--warmup", (t) => parseTrainFlags({ out: "x", warmup: t }), ["1.5"]],
  ["train", "--clip", (t) => parseTrainFlags({ out: "x", clip: t }), []],
  ["train", "--jasmin", (t) => parseTrainFlags({ out: "x", jasmin: t }), ["1e300", "1e7"]],
  ["train", "--seed", (t) => parseTrainFlags({ out: "x", seed: t }), ["1.5", "1e12"]],
  ["train", "--limit", (t) => parseTrainFlags({ out: "x", limit: t }), ["0", "1.5"]],
  ["train", "--test-limit", (t) => parseTrainFlags({ out: "x", testLimit: t }), ["0", "1.5"]],
  ["demo", "--seed", (t) => parseDemoNumbers({ seed: t }), ["1.5", "1e12"]],
  ["demo", "--jasmin", (t) => parseDemoNumbers({ seed: "0", jasmin: t }), ["101"]],
];

test("every numeric flag of every command words a bad value the same way", () => {
  for (const [command, flag, parse, bad] of FLAGS)
    for (const text of [...ALWAYS_BAD, ...bad])
      assert.throws(
        () => parse(text),
        (e: unknown) => {
          assert.ok(e instanceof InputError, `${command} ${flag} ${JSON.stringify(text)}: ${String(e)}`);
          assert.match(e.message, form(command, flag, text), `${command} ${flag} ${JSON.stringify(text)}`);
          assert.doesNotMatch(e.message, JARGON, `${command} ${flag} ${JSON.stringify(text)}`);
          return true;
        },
        `${command} ${flag} ${JSON.stringify(text)}`,
      );
});

test("the wording says everything a flag accepts", () => {
  assert.equal(describeNumberRule({ integer: true, min: 1 }), "a positive integer");
  assert.equal(describeNumberRule({ integer: true, min: 1, max: 10000 }), "an integer from 1 to 10000");
  assert.equal(describeNumberRule({ integer: true, min: 0 }), "an integer >= 0");
  assert.equal(describeNumberRule({ above: 0 }), "a finite number > 0");
  assert.equal(describeNumberRule({ min: 0 }, true), "finite numbers >= 0");
  assert.equal(describeNumberRule({ min: 0, max: 100 }), "a number from 0 to 100");
  assert.equal(parseNumberFlag(" 16 ", "--n", { integer: true, min: 1 }, "analyze"), 16);
  assert.equal(parseNumberFlag("1e-3", "--lr", { above: 0 }), 1e-3);
  assert.throws(
    () => parseNumberFlag("abc", "--n", { integer: true, min: 1 }, "analyze"),
    { message: 'analyze: --n: must be a positive integer, got "abc"' },
  );
});

/** Runs `attnlip ...` asynchronously (so several can run at once). */
function attnlip(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [bin, ...args], { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

test("the command line prints them as one line with exit code 2, before any work", async () => {
  const out = join(mkdtempSync(join(tmpdir(), "attnlip-flags-")), "run");
  const cases: [string[], string][] = [
    [["analyze", "--random-init", "--n", "abc"], 'analyze: --n: must be an integer from 1 to 10000, got "abc"'],
    [["analyze", "--random-init", "--iterations", "1.5"], 'analyze: --iterations: must be an integer from 1 to 10000, got "1.5"'],
    [["analyze", "--random-init", "--iterations", "1e12"], 'analyze: --iterations: must be an integer from 1 to 10000, got "1e12"'],
    [["attack", "--random-init", "--eps", "1e400"], 'attack: --eps: must be a comma-separated list of finite numbers >= 0, got "1e400"'],
    [["train", "--out", out, "--lr", "1e400"], 'train: --lr: must be a finite number > 0, got "1e400"'],
    [["demo", "--seed", "-1"], 'demo: --seed: must be an integer from 0 to 4294967295, got "-1"'],
    [["demo", "--jasmin", "abc"], 'demo: --jasmin: must be a number from 0 to 100, got "abc"'],
    [["sigma", "--logits", "1,abc"], 'sigma: --logits: field 2: must be a number, got "abc"'],
    [["sigma", "0.5,1e"], 'sigma: row: field 2: must be a number, got "1e"'],
  ];
  // In this process, one after another (no start-up per case); the first case also runs as a separate process, as a user would.
  const results = [];
  for (const [k, [args]] of cases.entries()) results.push(k === 0 ? await attnlip(args) : await runAttnlipHere(args));
  results.forEach((r, i) => {
    const [args, line] = cases[i];
    const what = args.join(" ");
    assert.equal(r.code, 2, `${what}: exit ${r.code}, stderr ${r.stderr}`);
    assert.equal(r.stdout, "", `${what}: no work started`);
    assert.equal(r.stderr, `attnlip: ${line}\n`, what);
    assert.doesNotMatch(r.stderr.replace(/got ".*"$/m, ""), JARGON, what);
  });
});
