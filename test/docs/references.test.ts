// Comments and docs cite only files that exist in this repository (and sections that exist in
// them): a citation of a file that is not here sends a reader nowhere.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";

const root = new URL("../../", import.meta.url).pathname;

function files(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(join(root, dir))) {
    const rel = join(dir, name);
    if (statSync(join(root, rel)).isDirectory()) out.push(...files(rel));
    else if (/\.(ts|mjs|js|md)$/.test(name)) out.push(rel);
  }
  return out;
}

const sources = [...files("src"), ...files("test"), ...files("docs"), ...files("bench"), ...files("scripts"), "README.md"];

test("no file cites the first spec's documents or anything outside the repository", () => {
  const bad: string[] = [];
  for (const f of sources) {
    if (f === "test/docs/references.test.ts") continue;
    const text = readFileSync(join(root, f), "utf8");
    for (const m of text.matchAll(/\b(MATH|DESIGN|PERF)\.md\b|\.\.\/shared\b/g)) bad.push(`${f}: ${m[0]}`);
  }
  assert.deepEqual(bad, []);
});

test("every cited repository path (docs/*.md, src/**, test/**) exists, and every docs/math.md section cited is there", () => {
  const math = readFileSync(join(root, "docs/math.md"), "utf8");
  const sections = new Set([...math.matchAll(/^## (\d+)\./gm)].map((m) => m[1]));
  const missing: string[] = [];
  for (const f of sources) {
    if (f === "test/docs/references.test.ts") continue;
    const text = readFileSync(join(root, f), "utf8");
    for (const m of text.matchAll(/(?<![\w./-])((?:docs|src|test|bench)\/[\w./-]*\w\.(?:md|ts|png|json))/g))
      if (!existsSync(join(root, m[1])) && !m[1].startsWith("bench/results/")) missing.push(`${f}: ${m[1]}`);
    for (const m of text.matchAll(/docs\/math\.md,? sections? (\d+)(?:-(\d+))?/g))
      for (const s of [m[1], m[2]]) if (s !== undefined && !sections.has(s)) missing.push(`${f}: docs/math.md section ${s}`);
  }
  assert.deepEqual(missing, []);
});

test("package.json's entry points name files that exist (built files: their sources, as npm run build compiles dist/X.js from src/X.ts)", () => {
  const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
  const entries: string[] = [pkg.main, pkg.types];
  for (const v of Object.values(pkg.bin ?? {})) entries.push(v as string);
  for (const v of Object.values(pkg.exports ?? {})) entries.push(...(typeof v === "string" ? [v] : Object.values(v as Record<string, string>)));
  assert.ok(entries.length >= 9, `found ${entries.length} entries`);
  for (const e of entries) {
    const file = e.replace(/^\.\//, "").replace(/^dist\/(.*?)(\.d)?\.js$|^dist\/(.*?)\.d\.ts$/, (_m, a, _d, b) => `src/${a ?? b}.ts`);
    assert.ok(existsSync(join(root, file)), `package.json names ${e}, and ${file} does not exist`);
  }
});
