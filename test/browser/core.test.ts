// The library entry ("attnlip", src/index.ts) bundles for the browser: esbuild, with the browser
// as platform, fails on a Node built-in anywhere in its imports, its dependencies' included
// (test/architecture/imports.test.ts checks attnlip's own files; this checks the packages they
// use too). That the bundled code computes in a browser what it computes in Node is checked by
// the explorer's browser test (test/explorer/explorer.test.ts), whose web worker runs it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

test("the library entry bundles for the browser: no Node built-in in it or in the packages it uses", async () => {
  const result = await build({
    entryPoints: [fileURLToPath(new URL("../../src/index.ts", import.meta.url))],
    bundle: true,
    platform: "browser",
    format: "esm",
    write: false,
    logLevel: "silent",
  });
  assert.deepEqual(result.errors, []);
  const code = result.outputFiles[0].text;
  assert.match(code, /function sigma\(/, "the bundle holds the maths");
  assert.doesNotMatch(code, /from\s*"node:|require\("node:/);
});
