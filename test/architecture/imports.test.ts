// Imports run one way: from the commands down to the maths. Each top-level folder of src/ has a
// rank; a file may import from its own folder or from a folder of lower rank, never upward, and
// no import cycle exists between files: static, dynamic and type-only imports alike (a type
// import is erased at run time, but it ties the two files' designs as much as any other; each
// type lives on the lowest file that uses it, docs/design.md).
import { after, test } from "node:test";
import assert from "node:assert/strict";
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
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
  ["analysis", "radius", "certify"],
  ["study"],
  ["report"],
  ["explorer"],
  ["parallel"],
  ["pipelines"],
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
 * Relative imports of a file (static, re-exports, side-effect and dynamic), resolved to absolute
 * paths; without `types`, only those that load code at run time (`import type` and `export type`
 * are erased by the compiler).
 */
function imports(file: string, types = true): string[] {
  const text = readFileSync(file, "utf8");
  const out: string[] = [];
  for (const m of text.matchAll(
    /^\s*(?:import|export)(\s+type)?\b[^;]*?\bfrom\s*"(\.{1,2}\/[^"]+)"/gm,
  ))
    if (types || m[1] === undefined) out.push(resolve(dirname(file), m[2]));
  for (const m of text.matchAll(/^\s*import\s*"(\.{1,2}\/[^"]+)"/gm))
    out.push(resolve(dirname(file), m[1]));
  for (const m of text.matchAll(/\bimport\(\s*"(\.{1,2}\/[^"]+)"\s*\)/g))
    out.push(resolve(dirname(file), m[1]));
  return out;
}

/**
 * The import cycles of `files` (every import, type-only ones included), each as its files from
 * the first one met, back to it, relative to `root`.
 */
function cycles(files: readonly string[], root: string): string[] {
  const graph = new Map(files.map((f) => [f, imports(f)]));
  const state = new Map<string, "open" | "done">();
  const found: string[] = [];
  const visit = (f: string, path: string[]) => {
    if (state.get(f) === "done") return;
    if (state.get(f) === "open") {
      found.push([...path.slice(path.indexOf(f)), f].map((p) => relative(root, p)).join(" -> "));
      return;
    }
    state.set(f, "open");
    for (const t of graph.get(f) ?? []) visit(t, [...path, f]);
    state.set(f, "done");
  };
  for (const f of graph.keys()) visit(f, []);
  return found;
}

test("no file imports from a higher layer (type imports included)", () => {
  const upward: string[] = [];
  for (const f of files(src))
    for (const target of imports(f))
      if (rank(target) > rank(f)) upward.push(`${relative(src, f)} -> ${relative(src, target)}`);
  assert.deepEqual(upward, []);
});

test("nothing imports the command layer: cli/ parses flags and prints, the pipelines below it run (the library entries included)", () => {
  const intoCli: string[] = [];
  for (const f of files(src))
    for (const target of imports(f))
      if (relative(src, target).startsWith("cli/") && !relative(src, f).startsWith("cli/")) intoCli.push(`${relative(src, f)} -> ${relative(src, target)}`);
  assert.deepEqual(intoCli, []);
});

test("no import cycle between files, type-only imports included", () => {
  assert.deepEqual(cycles(files(src), src), []);
});

const scratch = mkdtempSync(join(tmpdir(), "attnlip-imports-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

test("the cycle check sees a circle made of type-only, re-exported and dynamic imports", () => {
  const write = (name: string, text: string) => {
    mkdirSync(dirname(join(scratch, name)), { recursive: true });
    writeFileSync(join(scratch, name), text);
    return join(scratch, name);
  };
  const typeOnly = [
    write("a.ts", 'import type { B } from "./b.ts";\nexport interface A { b?: B }\n'),
    write("b.ts", 'import type { A } from "./a.ts";\nexport interface B { a?: A }\n'),
  ];
  assert.deepEqual(cycles(typeOnly, scratch), ["a.ts -> b.ts -> a.ts"]);
  const mixed = [
    write("c/x.ts", 'export type * from "../d.ts";\n'),
    write("d.ts", 'export async function load() {\n  return import("./e.ts");\n}\n'),
    write("e.ts", 'import "./c/x.ts";\n'),
  ];
  assert.deepEqual(cycles(mixed, scratch), ["c/x.ts -> d.ts -> e.ts -> c/x.ts"]);
  const none = [
    write("f.ts", 'import { g } from "./g.ts";\n'),
    write("g.ts", "export const g = 1;\n"),
  ];
  assert.deepEqual(cycles(none, scratch), []);
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
