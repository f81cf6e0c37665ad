// Facts README states that the code decides, checked against the code so that they cannot
// drift: the data sources there are, what `demo --force` deletes, where the weight cache
// lives, which transformers release the Hugging Face import is checked against, and what the
// digest on the "evaluating the first N" line is of.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { DEMO_OUTPUTS } from "../../src/pipelines/demoOut.ts";
import { dataSources, specForm } from "../../src/data/sources/index.ts";

const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8");
/** README as one line of text (paragraphs wrap anywhere). */
const text = readme.replace(/\s+/g, " ");

test("README lists every data source there is, says there is no mail-folder source, and how to use one's own mail", () => {
  const forms = dataSources().map(specForm);
  const sentence = /These are all the data sources there are \(([^)]*)\)/.exec(text);
  assert.ok(sentence !== null, "the sentence listing the sources");
  assert.deepEqual(
    sentence[1].split(", ").map((f) => f.replace(/`/g, "")),
    forms,
  );
  assert.match(
    text,
    /there is no mbox, maildir or `\.eml` source, so to train on your own mail, first export it to a CSV/,
  );
});

test("README says demo --force deletes the run folders whole, naming everything the demo replaces", () => {
  const sentence = /Replacing deletes (.*?), then writes them again/.exec(text);
  assert.ok(sentence !== null);
  assert.match(sentence[1], /`baseline\/` and `jasmin\/` whole/);
  for (const output of DEMO_OUTPUTS) assert.ok(sentence[1].includes(`\`${output}\``), output);
});

test("README names the weight cache's folder as the code builds it, safe to delete, wiped by npm ci; and the progress lines", () => {
  const store = readFileSync(
    new URL("../../src/analysis/weightCacheStore.ts", import.meta.url),
    "utf8",
  );
  assert.match(store, /join\(sources\.root, "node_modules", "\.cache", "attnlip", "weights"\)/);
  assert.match(
    text,
    /kept in `node_modules\/\.cache\/attnlip\/weights\/` inside attnlip's own folder/,
  );
  assert.match(text, /safe to delete at any time .* `npm ci` wipes it/);
  assert.match(text, /Long stages print progress lines on stderr/);
});

test("README names the transformers release that wrote the Hugging Face fixtures", () => {
  const dir = new URL("../fixtures/hf/", import.meta.url);
  const versions = new Set(
    readdirSync(dir, { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map(
        (d) =>
          JSON.parse(readFileSync(new URL(`${d.name}/config.json`, dir), "utf8"))
            .transformers_version as string,
      ),
  );
  assert.equal(versions.size, 1, `one release: ${[...versions]}`);
  const [version] = versions;
  assert.ok(
    text.includes(`(test/hf/vit.test.ts, test/hf/text.test.ts), release ${version}:`),
    version,
  );
});

test("README's example lines call the evaluated examples' digest a digest of their indices", () => {
  const lines = [...text.matchAll(/evaluating the first \d+( held out)? \(([^)]*)\)/g)].map(
    (m) => m[2],
  );
  assert.ok(lines.length >= 2, `${lines.length} lines`);
  for (const inside of lines) assert.match(inside, /^digest of their indices: sha256:/);
});

test("README's library section says useBackend comes first, with the line the library throws without it", async () => {
  const { NO_BACKEND_MESSAGE } = await import("../../src/backend.ts");
  const start = NO_BACKEND_MESSAGE.slice(0, NO_BACKEND_MESSAGE.indexOf("` (") + 1);
  assert.ok(text.includes(`\`\`${start} ...\`\``), start);
  assert.match(text, /`useBackend` comes first: attnlip never picks a tfjs backend by itself/);
});
