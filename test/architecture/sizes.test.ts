// Sizes (issue 39): no file of src/ over 600 lines and no function over 100, so that each file
// holds one idea and each function reads at once. A function is any function declaration,
// method, arrow function or function expression (nested ones counted on their own, and inside
// their parent's lines), from its first token (its docstring not counted) to its last line.
// Split where the split names an idea; a hot kernel that cannot be split without losing speed
// goes in EXCEPTIONS with its reason.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import ts from "typescript";

const root = new URL("../../", import.meta.url).pathname;

/** Most lines a file of src/ may have: text.split("\n").length, so a final newline counts one. */
const MAX_FILE_LINES = 600;

/** Most lines a function may span, first and last line included. */
const MAX_FUNCTION_LINES = 100;

/**
 * Named, temporary exceptions: "path" for a file, "path:name" for a function, with the reason.
 * None today: src/cli/certifyCommand.ts and src/certify/ were split by the certify change, and
 * weightedRowSums (src/lipschitz/rules/rowContractions.ts) fits once its tail is a function.
 */
const EXCEPTIONS: Record<string, string> = {};

function sources(dir: string): string[] {
  return readdirSync(join(root, dir)).flatMap((name) => {
    const rel = join(dir, name);
    if (statSync(join(root, rel)).isDirectory()) return sources(rel);
    return rel.endsWith(".ts") ? [rel] : [];
  });
}

/** One file or function over its limit: "path N lines" or "path:line name N lines". */
interface Offender {
  key: string;
  line: string;
}

/** The files over MAX_FILE_LINES and the functions over MAX_FUNCTION_LINES of one source text. */
function offenders(path: string, text: string): Offender[] {
  const out: Offender[] = [];
  const lines = text.split("\n").length;
  if (lines > MAX_FILE_LINES) out.push({ key: path, line: `${path} ${lines} lines` });
  const sf = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const visit = (n: ts.Node): void => {
    if (
      ts.isFunctionDeclaration(n) ||
      ts.isMethodDeclaration(n) ||
      ts.isArrowFunction(n) ||
      ts.isFunctionExpression(n)
    ) {
      const a = sf.getLineAndCharacterOfPosition(n.getStart()).line;
      const b = sf.getLineAndCharacterOfPosition(n.getEnd()).line;
      const name = n.name?.getText() ?? "(anonymous)";
      if (b - a + 1 > MAX_FUNCTION_LINES)
        out.push({ key: `${path}:${name}`, line: `${path}:${a + 1} ${name} ${b - a + 1} lines` });
    }
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return out;
}

/** A function of `body` lines (declaration and closing brace included) as source text. */
function functionOf(name: string, body: number): string {
  const inner = Array.from({ length: body - 2 }, (_, i) => `  const v${i} = ${i};`);
  return [`function ${name}(): void {`, ...inner, "}"].join("\n");
}

test("the size rule flags a 101-line function, method or arrow function and a 601-line file, and passes 100 and 600", () => {
  assert.deepEqual(offenders("a.ts", functionOf("fits", 100)), []);
  assert.deepEqual(
    offenders("a.ts", functionOf("long", 101)).map((o) => o.line),
    ["a.ts:1 long 101 lines"],
  );
  const method = `class C {\n  /** doc */\n  ${functionOf("m", 101).replace("function ", "")}\n}`;
  assert.deepEqual(
    offenders("b.ts", method).map((o) => o.key),
    ["b.ts:m"],
    "a method, its docstring not counted",
  );
  const arrow = `export const f = () => {\n${"  0;\n".repeat(99)}};`;
  assert.deepEqual(
    offenders("c.ts", arrow).map((o) => o.line),
    ["c.ts:1 (anonymous) 101 lines"],
  );
  assert.deepEqual(offenders("d.ts", "\n".repeat(599)), [], "600 lines");
  assert.deepEqual(
    offenders("d.ts", "\n".repeat(600)).map((o) => o.line),
    ["d.ts 601 lines"],
  );
});

test(`every file of src/ has at most ${MAX_FILE_LINES} lines and every function at most ${MAX_FUNCTION_LINES}`, () => {
  const found = sources("src").flatMap((f) =>
    offenders(relative(root, join(root, f)), readFileSync(join(root, f), "utf8")),
  );
  const unexpected = found.filter((o) => !(o.key in EXCEPTIONS)).map((o) => o.line);
  assert.deepEqual(unexpected, [], "split these where the split names an idea");
  const stale = Object.keys(EXCEPTIONS).filter((k) => !found.some((o) => o.key === k));
  assert.deepEqual(stale, [], "exceptions that are within the limits now: remove them");
});
