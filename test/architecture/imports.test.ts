// Imports run one way: from the commands down to the maths. Each top-level folder of src/ has a
// rank; a file may import from its own folder or from a folder of lower rank, never upward, and
// no import cycle exists between files (static and dynamic imports alike).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const src = new URL("../../src/", import.meta.url).pathname;

/** The layers, bottom first (docs/design.md draws them). Files directly in src/ are listed by name. */
export const LAYERS = [
  ["backend.ts", "stats.ts", "util"],
  ["softmax"],
  ["io"],
  ["nn"],
  ["data", "hf"],
  ["lipschitz"],
  ["train"],
  ["robustness"],
  ["analysis", "radius"],
  ["study"],
  ["report"],
  ["explorer"],
  ["parallel"],
  ["cli"],
  ["index.ts", "node.ts"],
];

function rank(file: string): number {
  const top = relative(src, file).split("/")[0];
  const r = LAYERS.findIndex((names) => names.includes(top));
  if (r < 0)
    throw new Error(
      `${relative(src, file)}: its folder ${top} has no layer in test/architecture/imports.test.ts`,
    );
  return r;
}

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? files(p) : p.endsWith(".ts") ? [p] : [];
  });
}

/**
 * Relative imports of a file (static, re-exports and dynamic), resolved to absolute paths;
 * without `types`, only those that load code at run time (`import type` and `export type` are
 * erased by the compiler and cannot form a loading cycle).
 */
function imports(file: string, types = true): string[] {
  const text = readFileSync(file, "utf8");
  const out: string[] = [];
  for (const m of text.matchAll(
    /^\s*(?:import|export)(\s+type)?\b[^;]*?\bfrom\s*"(\.{1,2}\/[^"]+)"/gm,
  ))
    if (types || m[1] === undefined) out.push(resolve(dirname(file), m[2]));
  for (const m of text.matchAll(/\bimport\(\s*"(\.{1,2}\/[^"]+)"\s*\)/g))
    out.push(resolve(dirname(file), m[1]));
  return out;
}

test("no file imports from a higher layer", () => {
  const upward: string[] = [];
  for (const f of files(src))
    for (const target of imports(f))
      if (rank(target) > rank(f)) upward.push(`${relative(src, f)} -> ${relative(src, target)}`);
  assert.deepEqual(upward, []);
});

test("no import cycle between files (code that loads at run time)", () => {
  const graph = new Map(files(src).map((f) => [f, imports(f, false)]));
  const state = new Map<string, "open" | "done">();
  const cycles: string[] = [];
  const visit = (f: string, path: string[]) => {
    if (state.get(f) === "done") return;
    if (state.get(f) === "open") {
      cycles.push([...path.slice(path.indexOf(f)), f].map((p) => relative(src, p)).join(" -> "));
      return;
    }
    state.set(f, "open");
    for (const t of graph.get(f) ?? []) visit(t, [...path, f]);
    state.set(f, "done");
  };
  for (const f of graph.keys()) visit(f, []);
  assert.deepEqual(cycles, []);
});

test('the library entry (src/index.ts, the package\'s "attnlip") loads no Node module, directly or through its imports', () => {
  const seen = new Set<string>();
  const queue = [join(src, "index.ts")];
  const nodeImports: string[] = [];
  while (queue.length > 0) {
    const f = queue.pop()!;
    if (seen.has(f)) continue;
    seen.add(f);
    const text = readFileSync(f, "utf8");
    for (const m of text.matchAll(
      /^\s*(?:import|export)(?!\s+type\b)[^;]*?\bfrom\s*"(node:[^"]+)"|\bimport\(\s*"(node:[^"]+)"\s*\)|^\s*import\s*"(node:[^"]+)"/gm,
    ))
      nodeImports.push(`${relative(src, f)}: ${m[1] ?? m[2] ?? m[3]}`);
    queue.push(...imports(f, false));
  }
  assert.ok(seen.size > 50, `walked only ${seen.size} files`);
  assert.deepEqual(nodeImports, []);
});
