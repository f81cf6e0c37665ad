// Small command-line things a newcomer met: explore names --host when the host is at fault;
// `help NAME` for no command exits 2; integer flags take whole numbers in digits only ("1e3"
// and "16.0" are refused, saying why); help pages show every default, mark required options,
// and show options with choices as the others.
import { test } from "node:test";
import assert from "node:assert/strict";
import type { AddressInfo } from "node:net";
import { createServer } from "node:net";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Option } from "commander";
import { parseAnalyzeNumbers } from "../../src/cli/analyzeCommand.ts";
import { parseAttackFlags } from "../../src/cli/attackCommand.ts";
import { parseDemoNumbers } from "../../src/cli/demoCommand.ts";
import { listenError, serveExplorer } from "../../src/pipelines/exploreRun.ts";
import { buildProgram } from "../../src/cli/program.ts";
import { parseTrainFlags } from "../../src/cli/trainCommand.ts";
import { InputError } from "../../src/util/errors.ts";
import { numberProblem, parseNumberFlag, readNumber } from "../../src/util/numberFlag.ts";
import { runAttnlipHere } from "../helpers/cli.ts";

/** The one line a refused command printed (exit 2). */
async function refusal(args: string[]): Promise<string> {
  const r = await runAttnlipHere(args);
  assert.equal(r.code, 2, `${args.join(" ")}: ${r.stdout}${r.stderr}`);
  const lines = r.stderr.trim().split("\n");
  assert.equal(lines.length, 1, r.stderr);
  return lines[0];
}

test("explore: a host that does not resolve or is not this machine's names --host; a taken port names --port", async () => {
  for (const [host, why] of [
    ["999.1.1.1", /no such host or address \(getaddrinfo ENOTFOUND\)/],
    ["no-such-host.invalid", /no such host or address/],
    ["192.0.2.1", /not an address of this machine \(listen EADDRNOTAVAIL\)/], // TEST-NET-1: nobody's
  ] as const)
    await assert.rejects(serveExplorer(new Map(), host, 0), (e: unknown) => {
      assert.ok(e instanceof InputError, String(e));
      assert.match(e.message, new RegExp(`^explore: --host ${host.replace(/\./g, "\\.")}: `));
      assert.match(e.message, why);
      assert.doesNotMatch(e.message, /--port/);
      return true;
    });
  const taken = createServer();
  await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
  const port = (taken.address() as AddressInfo).port;
  try {
    await assert.rejects(serveExplorer(new Map(), "127.0.0.1", port), {
      message: `explore: --port ${port}: in use by another program; pick another port, or 0 for any free one`,
    });
  } finally {
    taken.close();
  }
  const denied = Object.assign(new Error("listen EACCES"), { code: "EACCES", syscall: "listen" });
  assert.match(listenError(denied, "127.0.0.1", 80).message, /^explore: --port 80: not allowed/);
});

test("help NAME for no command exits 2 with one line naming it; help COMMAND and help still exit 0", async () => {
  assert.equal(
    await refusal(["help", "nosuch"]),
    "attnlip: help: unknown command 'nosuch' (commands: demo, sigma, train, analyze, attack, report, export, study, explore, radius, certify)",
  );
  for (const args of [["help", "sigma"], ["help"], ["help", "help"]]) {
    const r = await runAttnlipHere(args);
    assert.equal(r.code, 0, `${args.join(" ")}: ${r.stderr}`);
    assert.match(r.stdout + r.stderr, /^Usage: attnlip /); // commander writes `help help` to stderr
  }
});

test("integer flags take whole numbers in digits only: 1e3, 16.0 and 2. are refused, saying why, in every command", async () => {
  assert.equal(readNumber("1e3", { integer: true, min: 1 }), null);
  assert.equal(readNumber("+16", { integer: true, min: 1 }), 16);
  assert.equal(readNumber("-0", { integer: true, min: 0 }), 0);
  assert.ok(Object.is(readNumber("-0", { integer: true, min: 0 }), 0), "not -0");
  assert.equal(readNumber("1e3", { min: 0 }), 1000, "a real-valued flag still takes exponents");
  assert.equal(
    numberProblem(["1e3"], { integer: true, min: 1, max: 10000 }),
    "must be an integer from 1 to 10000, written in digits (1e3 is 1000)",
  );
  assert.equal(
    numberProblem(["1e12"], { integer: true, min: 1, max: 10000 }),
    "must be an integer from 1 to 10000",
    "out of range anyway: no notation hint",
  );
  assert.equal(
    numberProblem(["0", "1e1"], { integer: true, min: 0 }, true),
    "must be a comma-separated list of integers >= 0, written in digits (1e1 is 10)",
  );
  const parsers: [string, (t: string) => unknown][] = [
    ["analyze: --n", (t) => parseAnalyzeNumbers({ seed: "0", n: t, iterations: "1000" })],
    ["analyze: --seed", (t) => parseAnalyzeNumbers({ seed: t, n: "16", iterations: "1000" })],
    ["analyze: --iterations", (t) => parseAnalyzeNumbers({ seed: "0", n: "16", iterations: t })],
    ["attack: --n", (t) => parseAttackFlags({ n: t })],
    ["attack: --steps", (t) => parseAttackFlags({ steps: t })],
    ["attack: --batch", (t) => parseAttackFlags({ batch: t })],
    ["train: --epochs", (t) => parseTrainFlags({ out: "x", epochs: t })],
    ["train: --limit", (t) => parseTrainFlags({ out: "x", limit: t })],
    ["train: --warmup", (t) => parseTrainFlags({ out: "x", warmup: t })],
    ["demo: --seed", (t) => parseDemoNumbers({ seed: t })],
    [
      "explore: --port",
      (t) => parseNumberFlag(t, "--port", { integer: true, min: 0, max: 65535 }, "explore"),
    ],
  ];
  for (const [what, parse] of parsers) {
    for (const text of ["1e3", "16.0", "2.", "1E2"])
      assert.throws(
        () => parse(text),
        (e: unknown) =>
          e instanceof InputError &&
          e.message.startsWith(`${what}: must be `) &&
          e.message.includes(`written in digits (${text} is ${Number(text)})`) &&
          e.message.endsWith(`, got ${JSON.stringify(text)}`),
        `${what} ${text}`,
      );
    assert.doesNotThrow(() => parse("16"), what);
  }
  assert.equal(
    await refusal(["analyze", "--random-init", "--n", "1e3"]),
    'attnlip: analyze: --n: must be an integer from 1 to 10000, written in digits (1e3 is 1000), got "1e3"',
  );
  const study = join(mkdtempSync(join(tmpdir(), "attnlip-cli-")), "s");
  assert.match(
    await refusal(["study", study, "--seeds", "0,1e1"]),
    /^attnlip: study: --seeds: must be a comma-separated list of integers >= 0, written in digits \(1e1 is 10\), got "0,1e1"$/,
  );
  assert.match(
    await refusal(["radius", "--random-init", "--n", "5.0"]),
    /^attnlip: radius: --n: must be an integer from 1 to 1000, written in digits \(5\.0 is 5\), got "5\.0"$/,
  );
});

test("help pages: every default shown, required options marked, options with choices written as the others", async () => {
  const help = async (command: string) =>
    (await runAttnlipHere([command, "--help"])).stdout.replace(/\s+/g, " ");
  const train = await help("train");
  assert.match(train, /--limit <n> use the first n training examples \(default: all\)/);
  assert.match(train, /--test-limit <n> use the first n test examples \(default: all\)/);
  assert.match(train, /--out <dir> [^-]*\(required, except with --resume\)/);
  assert.match(train, /--backend <name> tfjs backend: wasm or cpu \(default: wasm\)/);
  const report = await help("report");
  assert.match(
    report,
    /--title <text> title of the report \(default: attnlip report: A vs B, with the run names; /,
  );
  assert.match(report, /--out <file> the HTML file to write \(required\)/);
  assert.match(await help("export"), /--out <dir> the folder to write \(required\)/);
  const analyze = await help("analyze");
  assert.match(analyze, /--mlp <mode> MLP factor .* or relaxed \(default: local\)/);
  for (const command of buildProgram().commands) {
    const page = await help(command.name());
    assert.doesNotMatch(page, /choices:/, `${command.name()} --help`);
    assert.doesNotMatch(page, /default: "/, `${command.name()} --help: a quoted default`);
    // commander still checks the choices, so the description must name every one of them.
    for (const o of command.options as Option[])
      for (const choice of o.argChoices ?? [])
        assert.ok(
          o.description.includes(choice),
          `${command.name()} ${o.flags}: "${choice}" unnamed`,
        );
  }
});
