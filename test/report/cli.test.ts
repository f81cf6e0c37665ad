import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runAttnlip, runAttnlipHere } from "../helpers/cli.ts";
import { FIXTURES } from "./helpers.ts";

test("attnlip report A B --out writes one HTML file comparing both runs", () => {
  const dir = mkdtempSync(join(tmpdir(), "attnlip-report-cli-"));
  const out = join(dir, "out", "report.html");
  const r = runAttnlip([
    "report",
    FIXTURES.baseline,
    FIXTURES.jasmin,
    "--out",
    out,
    "--names",
    "base,jas",
    "--title",
    "My title",
  ]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^wrote .*report\.html \(\d+ KiB\)\n$/);
  const html = readFileSync(out, "utf8");
  assert.match(html, /<h1>My title<\/h1>/);
  assert.match(html, /<strong>base<\/strong>/);
  assert.match(html, /<strong>jas<\/strong>/);
  rmSync(dir, { recursive: true });
});

test("attnlip report: bad input exits 2 with one line and writes nothing", async () => {
  const dir = mkdtempSync(join(tmpdir(), "attnlip-report-cli-"));
  const out = join(dir, "report.html");
  mkdirSync(join(dir, "empty"));
  mkdirSync(join(dir, "broken"));
  writeFileSync(join(dir, "broken", "analysis.json"), '{"variants": ["a"], "layers": ');
  const cases: [string[], RegExp][] = [
    [[join(dir, "nope")], /^attnlip: run folder .*nope does not exist\n$/],
    [[join(dir, "empty")], /^attnlip: run folder .*empty holds no analysis\.json/],
    [[join(dir, "broken")], /^attnlip: .*broken\/analysis\.json: invalid JSON/],
    [
      [FIXTURES.minimal, "--names", "a,b"],
      /^attnlip: --names: expected 1 name \(one per run\), got 2\n$/,
    ],
    [
      [FIXTURES.minimal, FIXTURES.minimal, "--names", "a,a"],
      /^attnlip: --names: the names must differ\n$/,
    ],
  ];
  // In this process (no start-up per case); the first case also runs as a separate process, as a user would.
  for (const [k, [args, message]] of cases.entries()) {
    const r =
      k === 0
        ? runAttnlip(["report", ...args, "--out", out])
        : await runAttnlipHere(["report", ...args, "--out", out]);
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
    assert.match(r.stderr, message);
    assert.equal(r.stderr.trim().split("\n").length, 1);
    assert.ok(!existsSync(out));
  }
  const noOut = await runAttnlipHere(["report", FIXTURES.minimal]);
  assert.equal(noOut.code, 2);
  assert.match(
    noOut.stderr,
    /^attnlip: report: --out FILE: where to write the HTML report, e\.g\. attnlip report .* --out report\.html\n$/,
  );
  const nothing = await runAttnlipHere(["report"]);
  assert.equal(nothing.code, 2);
  assert.match(
    nothing.stderr,
    /^attnlip: report: give one or two run folders .* --out FILE, e\.g\. attnlip report runs\/demo\/baseline runs\/demo\/jasmin --out report\.html\n$/,
  );
  rmSync(dir, { recursive: true });
});

test("report refuses to replace an existing --out without --force, and warns when the runs were trained differently in more than JaSMin", async () => {
  const dir = mkdtempSync(join(tmpdir(), "attnlip-report-cli-"));
  const out = join(dir, "report.html");
  const first = await runAttnlipHere(["report", FIXTURES.baseline, FIXTURES.jasmin, "--out", out]);
  assert.equal(first.code, 0, first.stderr);
  assert.equal(first.stderr, "", "the fixtures differ only in JaSMin");
  const before = readFileSync(out, "utf8");
  assert.doesNotMatch(before, /trained differently/);
  const again = await runAttnlipHere(["report", FIXTURES.baseline, FIXTURES.jasmin, "--out", out]);
  assert.equal(again.code, 2);
  assert.match(
    again.stderr,
    /^attnlip: report: .*report\.html exists \(an earlier result\); give --force to replace it, or --out FILE to write elsewhere\n$/,
  );
  assert.equal(readFileSync(out, "utf8"), before);

  // A copy of the JaSMin run extended to 5 epochs, as README's `train --resume --epochs 5` does.
  const longer = join(dir, "longer");
  mkdirSync(longer);
  for (const f of ["analysis.json", "attack.json", "config.json", "metrics.jsonl"])
    writeFileSync(join(longer, f), readFileSync(join(FIXTURES.jasmin, f)));
  const state = JSON.parse(readFileSync(join(FIXTURES.jasmin, "train_state.json"), "utf8")) as {
    epochs: number;
    optimizer: { lr: number };
  };
  writeFileSync(
    join(longer, "train_state.json"),
    JSON.stringify({ ...state, epochs: 5, optimizer: { ...state.optimizer, lr: 0.002 } }),
  );
  const forced = await runAttnlipHere([
    "report",
    FIXTURES.baseline,
    longer,
    "--out",
    out,
    "--force",
  ]);
  assert.equal(forced.code, 0, forced.stderr);
  assert.equal(
    forced.stderr,
    "report: warning: the runs were trained differently in more than JaSMin (epochs: 3 vs 5; lr: 0.001 vs 0.002); the report says so at its top\n",
  );
  assert.match(
    readFileSync(out, "utf8"),
    /Warning: These runs were trained differently in more than JaSMin \(epochs: 3 vs 5; lr: 0\.001 vs 0\.002\)/,
  );
  rmSync(dir, { recursive: true });
});
