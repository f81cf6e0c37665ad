// The demo never replaces earlier results silently (issue 38, case 9): `demo --out DIR`
// overwrote a report.html and a checkpoint put there, and `demo --quick` replaced the full
// demo's runs/demo.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { defaultDemoOut, prepareDemoOut, type DemoIdentity } from "../../src/pipelines/demoOut.ts";
import { FULL_DEMO, QUICK_DEMO } from "../../src/pipelines/demoSettings.ts";
import { InputError } from "../../src/util/errors.ts";
import { runAttnlipHere } from "../helpers/cli.ts";

const QUICK: DemoIdentity = { settings: QUICK_DEMO, seed: 0, jasmin: QUICK_DEMO.jasmin };

/** A folder holding a user's report.html and a training checkpoint, and their digests. */
function userFolder(): { dir: string; digests: () => string[] } {
  const dir = mkdtempSync(join(tmpdir(), "attnlip-demo-out-"));
  mkdirSync(join(dir, "baseline"));
  writeFileSync(join(dir, "report.html"), "<html>my own report</html>");
  writeFileSync(join(dir, "baseline", "config.json"), '{"model": "mine"}');
  writeFileSync(join(dir, "baseline", "model.safetensors"), Buffer.from([1, 2, 3, 4]));
  const files = ["report.html", "baseline/config.json", "baseline/model.safetensors"];
  return {
    dir,
    digests: () =>
      files.map((f) =>
        createHash("sha256")
          .update(readFileSync(join(dir, f)))
          .digest("hex"),
      ),
  };
}

/** A folder as an earlier demo left it (demo.json, summary.json, run folders, report). */
function demoFolder(dir: string, identity: DemoIdentity): void {
  for (const run of ["baseline", "jasmin"]) {
    mkdirSync(join(dir, run), { recursive: true });
    writeFileSync(join(dir, run, "stale.txt"), "from the earlier demo");
  }
  writeFileSync(join(dir, "report.html"), "<html>earlier demo</html>");
  writeFileSync(
    join(dir, "demo.json"),
    JSON.stringify({ written_by: "attnlip demo", ...identity }),
  );
}

test("demo --out DIR holding a report.html and a checkpoint: exit 2, one line naming --out and --force, files unchanged", async () => {
  const { dir, digests } = userFolder();
  const before = digests();
  const r = await runAttnlipHere(["demo", "--quick", "--out", dir]);
  assert.equal(r.code, 2, r.stderr);
  const lines = r.stderr.trim().split("\n");
  assert.equal(lines.length, 1, r.stderr);
  assert.equal(
    lines[0],
    `attnlip: demo: ${dir} already holds baseline/, report.html (earlier results); give --force to replace them, or --out DIR to write elsewhere`,
  );
  assert.deepEqual(digests(), before, "SHA-256 of every file unchanged");
  assert.ok(!existsSync(join(dir, "demo.json")), "nothing written");
});

test("an earlier demo's results in an --out the user named are refused too, even with the same settings", async () => {
  const dir = mkdtempSync(join(tmpdir(), "attnlip-demo-out-"));
  demoFolder(dir, QUICK);
  await assert.rejects(
    prepareDemoOut({ out: dir, identity: QUICK, force: false, ownFolder: false }),
    (e: Error) =>
      e instanceof InputError &&
      /already holds baseline\/, jasmin\/, report\.html, demo\.json \(an earlier demo's results\); give --force/.test(
        e.message,
      ),
  );
  assert.ok(existsSync(join(dir, "baseline", "stale.txt")));
});

test("--force replaces the demo's outputs and leaves the user's other files alone", async () => {
  const { dir } = userFolder();
  writeFileSync(join(dir, "notes.txt"), "mine");
  const line = await prepareDemoOut({ out: dir, identity: QUICK, force: true, ownFolder: false });
  assert.equal(line, `demo: --force: replacing baseline/, report.html in ${dir}`);
  assert.ok(!existsSync(join(dir, "baseline")) && !existsSync(join(dir, "report.html")));
  assert.equal(readFileSync(join(dir, "notes.txt"), "utf8"), "mine");
  const mark = JSON.parse(readFileSync(join(dir, "demo.json"), "utf8"));
  assert.deepEqual(mark, { written_by: "attnlip demo", ...JSON.parse(JSON.stringify(QUICK)) });
});

test("the default folder holding an earlier demo with the same settings is replaced with a line saying so", async () => {
  const dir = join(mkdtempSync(join(tmpdir(), "attnlip-demo-own-")), "runs", "demo-quick");
  demoFolder(dir, QUICK);
  writeFileSync(join(dir, "notes.txt"), "mine");
  const line = await prepareDemoOut({ out: dir, identity: QUICK, force: false, ownFolder: true });
  assert.equal(
    line,
    `demo: replacing the earlier demo's results in ${dir} (same settings, seed 0 and JaSMin lambda 0.5)`,
  );
  assert.ok(
    !existsSync(join(dir, "baseline", "stale.txt")) && !existsSync(join(dir, "report.html")),
  );
  assert.equal(readFileSync(join(dir, "notes.txt"), "utf8"), "mine");
  // A demo from before demo.json is recognised by its summary.json.
  const old = join(mkdtempSync(join(tmpdir(), "attnlip-demo-own-")), "demo");
  mkdirSync(join(old, "baseline"), { recursive: true });
  writeFileSync(
    join(old, "summary.json"),
    JSON.stringify({
      settings: QUICK_DEMO,
      seed: 0,
      runs: [
        { name: "baseline", jasmin: 0 },
        { name: "jasmin", jasmin: 0.5 },
      ],
    }),
  );
  assert.match(
    (await prepareDemoOut({ out: old, identity: QUICK, force: false, ownFolder: true })) ?? "",
    /^demo: replacing the earlier demo's results in /,
  );
});

test("the default folder is refused when it holds a demo with other settings or something else", async () => {
  const dir = mkdtempSync(join(tmpdir(), "attnlip-demo-own-"));
  demoFolder(dir, { settings: FULL_DEMO, seed: 0, jasmin: 0.1 });
  await assert.rejects(
    prepareDemoOut({ out: dir, identity: QUICK, force: false, ownFolder: true }),
    (e: Error) =>
      e instanceof InputError &&
      e.message.includes(
        '(an earlier demo with other settings: model "vit-tiny" (now "vit-micro"), trainSize 4000 (now 256),',
      ) &&
      e.message.endsWith("; give --force to replace them, or --out DIR to write elsewhere"),
  );
  const seed = mkdtempSync(join(tmpdir(), "attnlip-demo-own-"));
  demoFolder(seed, { ...QUICK, seed: 1 });
  await assert.rejects(
    prepareDemoOut({ out: seed, identity: QUICK, force: false, ownFolder: true }),
    /\(an earlier demo with other settings: seed 1 \(now 0\)\)/,
  );
  const { dir: user, digests } = userFolder();
  const before = digests();
  await assert.rejects(
    prepareDemoOut({ out: user, identity: QUICK, force: false, ownFolder: true }),
    /\(not written by attnlip demo\); give --force/,
  );
  assert.deepEqual(digests(), before);
});

test("demo --quick has its own default folder: it never replaces the full demo's runs/demo", async () => {
  assert.equal(defaultDemoOut("image", false), "runs/demo");
  assert.equal(defaultDemoOut("image", true), "runs/demo-quick");
  assert.equal(defaultDemoOut("text", false), "runs/demo-text");
  assert.equal(defaultDemoOut("text", true), "runs/demo-text-quick");
  // A full demo's folder where the quick demo's default would be: refused, nothing changed.
  const cwd = mkdtempSync(join(tmpdir(), "attnlip-demo-cwd-"));
  demoFolder(join(cwd, "runs", "demo-quick"), { settings: FULL_DEMO, seed: 0, jasmin: 0.1 });
  const r = await runAttnlipHere(["demo", "--quick"], { cwd });
  assert.equal(r.code, 2, r.stderr);
  assert.match(
    r.stderr.trim(),
    /^attnlip: demo: runs\/demo-quick already holds baseline\/, jasmin\/, report\.html, demo\.json \(an earlier demo with other settings: [^\n]*\); give --force to replace them, or --out DIR to write elsewhere$/,
  );
  assert.ok(existsSync(join(cwd, "runs", "demo-quick", "baseline", "stale.txt")));
});

test("--force refuses, before removing anything, a file or a symbolic link where the demo writes a folder, and a folder where it writes a file", async () => {
  const cases: [string, (dir: string) => void, RegExp][] = [
    [
      "baseline is a file",
      (dir) => writeFileSync(join(dir, "baseline"), "mine"),
      /baseline is a file, where the demo writes its folder baseline\//,
    ],
    [
      "baseline is a link to a folder",
      (dir) => {
        mkdirSync(join(dir, "elsewhere"));
        writeFileSync(join(dir, "elsewhere", "keep.txt"), "keep");
        symlinkSync(join(dir, "elsewhere"), join(dir, "baseline"));
      },
      /baseline is a symbolic link/,
    ],
    [
      "report.html is a folder",
      (dir) => mkdirSync(join(dir, "report.html")),
      /report\.html is a folder, where the demo writes its file report\.html/,
    ],
  ];
  for (const [what, make, message] of cases) {
    const dir = mkdtempSync(join(tmpdir(), "attnlip-demo-odd-"));
    mkdirSync(join(dir, "jasmin"));
    writeFileSync(join(dir, "jasmin", "config.json"), "{}");
    writeFileSync(join(dir, "summary.json"), "{}");
    make(dir);
    await assert.rejects(
      prepareDemoOut({ out: dir, identity: QUICK, force: true, ownFolder: false }),
      (e: Error) =>
        e instanceof InputError &&
        /^demo: --out /.test(e.message) &&
        message.test(e.message) &&
        /nothing was changed/.test(e.message),
      what,
    );
    // Nothing was removed.
    assert.ok(
      existsSync(join(dir, "jasmin", "config.json")) && existsSync(join(dir, "summary.json")),
      `${what}: the demo's other outputs were removed`,
    );
    if (what.includes("link"))
      assert.ok(existsSync(join(dir, "elsewhere", "keep.txt")), "the link's target was touched");
  }
});
