// Runs every test/**/*.test.ts through node:test with tsx.
// Node 20's `--test` does not expand globs (that came in Node 21), so we list the files here.
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { spawnSync } from "node:child_process";

function collect(dir) {
  const out = [];
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...collect(path));
    else if (name.endsWith(".test.ts")) out.push(path);
  }
  return out;
}

const filter = process.argv.slice(2);
let files = collect("test");
if (filter.length > 0) files = files.filter((f) => filter.some((s) => f.includes(s)));
if (files.length === 0) {
  console.error("no test files matched");
  process.exit(1);
}
// The caches every test process reads, filled once first (scripts/warmCaches.ts).
const warm = spawnSync(process.execPath, ["--import", "tsx", "scripts/warmCaches.ts"], {
  stdio: "inherit",
});
if (warm.status !== 0) process.exit(warm.status ?? 1);
const result = spawnSync(
  process.execPath,
  ["--import", "tsx", "--test", "--test-concurrency=3", ...files],
  // Commands in tests run in one thread unless a test asks for workers (test/parallel/):
  // starting a pool for each small run would cost more than it saves.
  {
    stdio: "inherit",
    env: { ...process.env, ATTNLIP_WORKERS: process.env.ATTNLIP_WORKERS ?? "1" },
  },
);
process.exit(result.status ?? 1);
