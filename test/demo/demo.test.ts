import { test } from "node:test";
import { nearChanceNote, type DemoRunSummary } from "../../src/pipelines/demoRun.ts";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runAttnlip, runAttnlipHere } from "../helpers/cli.ts";

test("attnlip demo --quick --force trains both models, analyses, attacks and writes the report, replacing only its own outputs", async () => {
  const out = join(mkdtempSync(join(tmpdir(), "attnlip-demo-")), "demo");
  // Earlier results in the folder (a stale checkpoint folder with a file the demo does not
  // write, an old summary): --force replaces them (demoOut.test.ts: refused without it); a file
  // the demo does not write stays as it was.
  for (const run of ["baseline", "jasmin"]) {
    mkdirSync(join(out, run), { recursive: true });
    writeFileSync(join(out, run, "config.json"), "{}");
    writeFileSync(join(out, run, "stale.txt"), "from an earlier run");
  }
  writeFileSync(join(out, "summary.json"), '{"runs": []}');
  writeFileSync(join(out, "notes.txt"), "the user's own notes");
  {
    const r = runAttnlip(["demo", "--quick", "--out", out, "--force"]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^demo: --force: replacing baseline\/, jasmin\/, summary\.json in /m);
    assert.match(r.stdout, /median network Lipschitz, true/);
    assert.match(r.stdout, /median network bound\/true, t3-top2/);
    // The quick demo's models are near chance, and it says so whenever they are.
    const summary = JSON.parse(readFileSync(join(out, "summary.json"), "utf8")) as {
      runs: { cleanAccuracy: number }[];
    };
    const near = summary.runs.some((run) => run.cleanAccuracy < 0.325);
    assert.equal(
      /note: clean accuracy .* is near chance \(10\.0% for 10 classes\)/.test(r.stdout),
      near,
      r.stdout,
    );
  }
  for (const run of ["baseline", "jasmin"])
    assert.ok(
      !existsSync(join(out, run, "stale.txt")),
      `${run}: the earlier run's folder was replaced`,
    );
  for (const run of ["baseline", "jasmin"])
    for (const file of [
      "config.json",
      "model.safetensors",
      "metrics.jsonl",
      "analysis.json",
      "attack.json",
    ])
      assert.ok(existsSync(join(out, run, file)), `${run}/${file}`);
  assert.equal(readFileSync(join(out, "notes.txt"), "utf8"), "the user's own notes");
  const summary = JSON.parse(readFileSync(join(out, "summary.json"), "utf8"));
  assert.deepEqual(
    summary.runs.map((r: { name: string }) => r.name),
    ["baseline", "jasmin"],
  );
  assert.ok(summary.runs[1].jasmin > 0 && summary.runs[0].jasmin === 0);
  for (const run of summary.runs) {
    assert.ok(run.networkTrueMedian > 0);
    for (const ratio of Object.values(run.boundOverTrue) as number[])
      assert.ok(ratio >= 1, "bounds at or above the truth");
  }
  const html = readFileSync(join(out, "report.html"), "utf8");
  assert.match(html, /<svg/);
  assert.doesNotMatch(html, /https?:\/\//);
  // The demo's checkpoints open in the explorer; the report gives the command for each.
  assert.match(
    html,
    /<code>attnlip explore [^<]*baseline<\/code>, <code>attnlip explore [^<]*jasmin<\/code>/,
  );
});

test("nearChanceNote: within a quarter of the way from chance to 100% gets the note, naming the runs; above gets none", () => {
  const run = (name: string, cleanAccuracy: number) => ({ name, cleanAccuracy }) as DemoRunSummary;
  assert.equal(nearChanceNote([run("baseline", 0.9)], 10), null);
  assert.match(
    nearChanceNote([run("baseline", 0.19), run("jasmin", 0.5)], 10) ?? "",
    /^note: clean accuracy 19\.0% \(baseline\) is near chance \(10\.0% for 10 classes\)/,
  );
  assert.equal(nearChanceNote([run("a", 0.95)], 2), null);
  assert.match(nearChanceNote([run("a", 0.6)], 2) ?? "", /near chance \(50\.0% for 2 classes\)/);
});

test("attnlip demo rejects bad input with exit 2 and one line", async () => {
  const file = join(mkdtempSync(join(tmpdir(), "attnlip-demo-bad-")), "not-a-folder");
  writeFileSync(file, "x");
  const cases: [string[], RegExp][] = [
    [
      ["demo", "--quick", "--seed", "-1"],
      /^attnlip: demo: --seed: must be an integer from 0 to 4294967295, got "-1"$/,
    ],
    [["demo", "--quick", "--jasmin", "abc"], /--jasmin:/],
    [["demo", "--quick", "--backend", "gpu"], /gpu/],
    [["demo", "--quick", "--task", "audio"], /audio/],
    [
      ["demo", "--quick", "--out", file],
      /^attnlip: demo: --out: .*not-a-folder is a file, not a folder$/,
    ],
  ];
  // In this process (no start-up per case); the first case also runs as a separate process, as a user would.
  for (const [k, [args, message]] of cases.entries()) {
    const r = k === 0 ? runAttnlip(args) : await runAttnlipHere(args);
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
    const lines = r.stderr.trim().split("\n");
    assert.equal(lines.length, 1, `${args.join(" ")}: ${r.stderr}`);
    assert.match(lines[0], message);
  }
});

test("attnlip demo --task text --quick runs the same story on the SpamAssassin corpus", async () => {
  const out = join(mkdtempSync(join(tmpdir(), "attnlip-demo-text-")), "demo");
  const r = await runAttnlipHere(["demo", "--task", "text", "--quick", "--out", out]);
  assert.equal(r.code, 0, r.stderr);
  const summary = JSON.parse(readFileSync(join(out, "summary.json"), "utf8"));
  assert.equal(summary.settings.task, "text");
  for (const run of ["baseline", "jasmin"]) {
    assert.ok(existsSync(join(out, run, "tokenizer.json")), `${run}/tokenizer.json`);
    const analysis = JSON.parse(readFileSync(join(out, run, "analysis.json"), "utf8"));
    assert.equal(analysis.inputSpace, "embedding");
  }
  assert.ok(existsSync(join(out, "report.html")));
});
