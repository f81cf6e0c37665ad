import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runAttnlip, runAttnlipHere } from "../helpers/cli.ts";

test("sigma --json prints exactly the documented object for one row", () => {
  const r = runAttnlip(["sigma", "0.5,0.3,0.2", "--json"]);
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  assert.deepEqual(Object.keys(out), ["n", "sigma", "sigmaQuad", "sigmaTop2", "top1", "gershgorin", "trace", "half"]);
  assert.equal(out.n, 3);
  assert.ok(Math.abs(out.sigma - 0.388102496759067) < 1e-12);
  assert.ok(Math.abs(out.sigmaQuad - 0.394661853126194) < 1e-12);
  assert.equal(out.sigmaTop2, 0.4);
  assert.equal(out.half, 0.5);
});

test("sigma prints a table with ratios to sigma", async () => {
  const r = await runAttnlipHere(["sigma", "0.5,0.3,0.2"]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /sigma \(exact\)\s*│ 0\.388102/);
  assert.match(r.stdout, /sigmaTop2\s*│ 0\.4\s*│ 1\.03066/);
});

test("sigma --logits applies a stable softmax, also at magnitude 1e3", async () => {
  const r = await runAttnlipHere(["sigma", "--logits", "1000,-1000,999", "--json"]);
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  const a = 1 / (1 + Math.exp(-1));
  assert.ok(Math.abs(out.sigma - 2 * a * (1 - a)) < 1e-12, `got ${out.sigma}`);
  const neg = await runAttnlipHere(["sigma", "--logits", "-1,2,3", "--json"]);
  assert.equal(neg.code, 0, neg.stderr);
  assert.ok(JSON.parse(neg.stdout).sigma > 0);
});

test("sigma --file summarises many rows from CSV and JSON", async () => {
  const dir = mkdtempSync(join(tmpdir(), "attnlip-sigma-"));
  const csv = join(dir, "rows.csv");
  writeFileSync(csv, "\ufeff0.5,0.3,0.2\r\n\r\n0.7,0.3\r\n# a comment\n1,0,0\n");
  const r = await runAttnlipHere(["sigma", "--file", csv, "--json"]);
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  assert.equal(out.rows, 3);
  assert.equal(out.rowsWithPositiveSigma, 2);
  assert.ok(Math.abs(out.summary.sigma.max - 0.42) < 1e-12);
  const json = join(dir, "rows.json");
  writeFileSync(json, JSON.stringify([[0.25, 0.25, 0.25, 0.25], [0.97, 0.01, 0.01, 0.01]]));
  const t = await runAttnlipHere(["sigma", "--file", json]);
  assert.equal(t.code, 0, t.stderr);
  assert.match(t.stdout, /2 rows/);
  assert.match(t.stdout, /median ratio/);
});

const badCases: [string, string[], RegExp][] = [
  ["negative entry", ["sigma", "-0.1,0.6,0.5"], /entry 1 is negative/],
  ["NaN entry", ["sigma", "0.5,nan,0.5"], /entry 2 is NaN/],
  ["infinite entry", ["sigma", "0.5,inf"], /entry 2 is Infinity/],
  ["empty row", ["sigma", " "], /empty row/],
  ["empty field", ["sigma", "0.5,,0.5"], /field 2 is empty/],
  ["trailing comma", ["sigma", "0.5,0.5,"], /field 3 is empty/],
  ["sum off from 1", ["sigma", "0.5,0.4"], /sum to 0\.9, expected 1 within/],
  ["not a number", ["sigma", "0.5,abc"], /^attnlip: sigma: row: field 2: must be a number, got "abc"$/],
  ["not a number in --logits", ["sigma", "--logits", "1,1e"], /^attnlip: sigma: --logits: field 2: must be a number, got "1e"$/],
  ["infinite logit", ["sigma", "--logits", "1,-inf"], /--logits: entry 2 is -Infinity, expected a finite logit/],
  ["NaN logit", ["sigma", "--logits", "nan,1"], /--logits: entry 1 is NaN/],
  ["no input", ["sigma"], /give exactly one of/],
  ["two inputs", ["sigma", "0.5,0.5", "--logits", "1,2"], /give exactly one of/],
  ["missing file", ["sigma", "--file", "/nonexistent/rows.csv"], /cannot read \/nonexistent\/rows\.csv \(no such file\)/],
  ["unknown option", ["sigma", "--frobnicate"], /unknown option '--frobnicate'/],
  ["unknown command", ["sigmas"], /unknown command 'sigmas' \(Did you mean sigma\?\)$/],
  ["mistyped option, with the suggestion", ["attack", "--attacks", "fgsm"], /^attnlip: unknown option '--attacks' \(Did you mean --attack\?\)$/],
  ["mistyped command, with the suggestion", ["analyse"], /^attnlip: unknown command 'analyse' \(Did you mean analyze\?\)$/],
];

// The first case runs as its own process, as a user would; the others in this process
// (runAttnlipHere), which gives the same exit code and streams without a start-up each.
for (const [k, [name, args, message]] of badCases.entries()) {
  test(`bad input exits 2 with one line: ${name}`, async () => {
    const r = k === 0 ? runAttnlip(args) : await runAttnlipHere(args);
    assert.equal(r.code, 2, `exit code for ${args.join(" ")}: ${r.stderr}`);
    assert.equal(r.stdout, "");
    const lines = r.stderr.trim().split("\n");
    assert.equal(lines.length, 1, `expected one line, got: ${r.stderr}`);
    assert.match(lines[0], message);
    assert.match(lines[0], /^attnlip: /);
  });
}

test("bad rows in files name the file row", async () => {
  const dir = mkdtempSync(join(tmpdir(), "attnlip-sigma-"));
  const cases: [string, string, RegExp][] = [
    ["bad.csv", "0.5,0.5\n0.2,0.2\n", /--file row 2: entries sum to 0\.4/],
    ["bad.json", "[[0.5, 0.5], [1, \"x\"]]", /sigma: --file row 2: field 2: must be a number, got "x"/],
    ["bad2.csv", "0.5,0.5\n0.5,x\n", /sigma: --file row 2: field 2: must be a number, got "x"/],
    ["broken.json", "[[0.5, 0.5]", /is not valid JSON/],
    ["flat.json", "[0.5, 0.5]", /must hold a JSON array of arrays/],
    ["empty.csv", "\n\n", /holds no rows/],
    ["rows.xlsx", "", /expected a \.csv or \.json file/],
  ];
  for (const [file, content, message] of cases) {
    const path = join(dir, file);
    writeFileSync(path, content);
    const r = file === "bad.csv" ? runAttnlip(["sigma", "--file", path]) : await runAttnlipHere(["sigma", "--file", path]);
    assert.equal(r.code, 2, `${file}: ${r.stderr}`);
    assert.match(r.stderr.trim(), message);
    assert.equal(r.stderr.trim().split("\n").length, 1);
  }
  const ok = await runAttnlipHere(["sigma", "--file", join(dir, "bad.csv"), "--normalize", "--json"]);
  assert.equal(ok.code, 0, ok.stderr);
});

test("help and version exit 0", async () => {
  assert.equal(runAttnlip(["--help"]).code, 0); // one real process; the rest in this one
  const help = await runAttnlipHere(["sigma", "--help"]);
  assert.equal(help.code, 0);
  assert.match(help.stdout, /^Usage: attnlip sigma/);
  assert.match((await runAttnlipHere(["--version"])).stdout, /^\d+\.\d+\.\d+\n$/);
});

test("--normalize survives sums that overflow", async () => {
  const r = await runAttnlipHere(["sigma", "1e308,1e308", "--normalize", "--json"]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(JSON.parse(r.stdout).sigma, 0.5);
});

test("a closed output pipe is not an error; no arguments prints help", async () => {
  const none = await runAttnlipHere([]);
  assert.equal(none.code, 0);
  assert.match(none.stdout, /Usage: attnlip/);
});
