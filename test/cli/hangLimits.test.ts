// Test time limits catch hangs, not slowness (issue 38, case 11): a command is stopped only
// when it makes no progress, and the failure names the command and where it ran.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { runAttnlip } from "../helpers/cli.ts";
import { watchdog } from "../helpers/patience.ts";

const idleKill = fileURLToPath(new URL("../helpers/idleKill.mjs", import.meta.url));

/** idleKill on a node -e script, with the given idle limit. */
function underIdleKill(idleMs: number, script: string) {
  return spawnSync(
    process.execPath,
    [idleKill, String(idleMs), '"the script"', process.execPath, "-e", script],
    { encoding: "utf8" },
  );
}

test("idleKill kills a command that prints nothing, naming it; one that keeps printing runs to its end", () => {
  const silent = underIdleKill(300, "setTimeout(() => {}, 60_000)");
  assert.equal(silent.signal, "SIGKILL");
  assert.match(
    silent.stderr,
    /idleKill: "the script" printed nothing for 0.3 s and was killed as hung\n$/,
  );
  // Runs for about 3 s, twice the limit of 1.5 s, printing every 100 ms.
  const busy = underIdleKill(
    1500,
    "let i = 0; const t = setInterval(() => { console.log(i); if (++i === 30) { clearInterval(t); process.exitCode = 3; } }, 100)",
  );
  assert.equal(busy.status, 3, busy.stderr);
  assert.equal(busy.stdout.trim().split("\n").length, 30);
  assert.equal(busy.stderr, "");
});

test("runAttnlip reports a killed command with its arguments and folder (code null)", () => {
  const r = runAttnlip(["demo", "--quick", "--out", "somewhere"], { idleMs: 1, cwd: "/" });
  assert.equal(r.code, null);
  assert.match(
    r.stderr,
    /idleKill: "attnlip demo --quick --out somewhere" \(in \/\) printed nothing for 0.001 s and was killed as hung/,
  );
  const ok = runAttnlip(["--version"]);
  assert.equal(ok.code, 0, ok.stderr);
});

test("watchdog rejects with the description only after a spell without progress", async () => {
  const dog = watchdog((s) => `step X at Y made no progress for ${s} s`, 1000);
  const beat = setInterval(dog.progress, 20);
  const kept = await Promise.race([
    dog.hung.then(
      () => "resolved",
      () => "hung",
    ),
    new Promise((r) => setTimeout(r, 2500, "alive")),
  ]);
  clearInterval(beat);
  assert.equal(kept, "alive", "progress every 20 ms keeps a 1 s watchdog quiet for 2.5 s");
  const alive = setTimeout(() => {}, 60_000); // the watchdog's own timer keeps no process alive
  await assert.rejects(dog.hung, /^Error: step X at Y made no progress for 1 s$/);
  clearTimeout(alive);
  dog.stop();
});
