// The robustness files import one way, type imports included: the registry declares the types
// the attack files implement and imports none of them; the built-ins are registered by their
// own index (attacks.ts); the evaluation's result types live in tally.ts, which evaluate.ts
// imports. (test/architecture/imports.test.ts checks the run-time cycles of all of src/.)
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const root = new URL("../../src/robustness/", import.meta.url).pathname;

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? files(p) : p.endsWith(".ts") ? [p] : [];
  });
}

/** Relative imports and re-exports of a file inside src/robustness, `import type` included. */
function imports(file: string): string[] {
  const text = readFileSync(file, "utf8");
  return [
    ...text.matchAll(/^\s*(?:import|export)(?:\s+type)?\b[^;]*?\bfrom\s*"(\.{1,2}\/[^"]+)"/gm),
  ]
    .map((m) => resolve(dirname(file), m[1]))
    .filter((t) => t.startsWith(root));
}

test("no import cycle between the robustness files, type imports included", () => {
  const graph = new Map(files(root).map((f) => [f, imports(f)]));
  const state = new Map<string, "open" | "done">();
  const cycles: string[] = [];
  const visit = (f: string, path: string[]) => {
    if (state.get(f) === "done") return;
    if (state.get(f) === "open") {
      cycles.push([...path.slice(path.indexOf(f)), f].map((p) => relative(root, p)).join(" -> "));
      return;
    }
    state.set(f, "open");
    for (const t of graph.get(f) ?? []) visit(t, [...path, f]);
    state.set(f, "done");
  };
  for (const f of graph.keys()) visit(f, []);
  assert.deepEqual(cycles, []);
});

test("the registry imports no attack, and the attack files import the registry's types only", () => {
  const registry = join(root, "registry.ts");
  const attackFiles = [
    "fgsm.ts",
    "pgd.ts",
    "apgd.ts",
    "apgdDlr.ts",
    "apgdTargeted.ts",
    "square.ts",
    "autoattack.ts",
  ];
  assert.deepEqual(
    imports(registry)
      .map((p) => relative(root, p))
      .filter((p) => attackFiles.includes(p) || p === "attacks.ts"),
    [],
  );
  for (const f of attackFiles) {
    const text = readFileSync(join(root, f), "utf8");
    assert.doesNotMatch(
      text,
      /^import \{[^}]*\} from "\.\/registry\.ts"/m,
      `${f} imports the registry's code`,
    );
    assert.doesNotMatch(text, /from "\.\/attacks\.ts"/, `${f} imports the built-ins' index`);
  }
});
