// The line saying which examples an evaluation used names its digest for what it is: a digest of
// the evaluated examples' indices (data/heldOut.ts indexDigest), not of their content, which
// "(sha256:...)" alone suggested beside "content and digests checked".
import { test } from "node:test";
import assert from "node:assert/strict";
import { describeSplit, indexDigest } from "../../src/data/heldOut.ts";

const base = {
  spec: "mnist",
  splitSeed: 5,
  trainCount: 4000,
  testCount: 2000,
  evaluated: 3,
  evaluatedDigest: indexDigest([4, 9, 17]),
  digestsChecked: true,
  contentChecked: true,
};

test("every origin's line says the digest is of the evaluated indices", () => {
  const digest = indexDigest([4, 9, 17]);
  assert.match(digest, /^sha256:[0-9a-f]{16}$/);
  for (const origin of ["checkpoint", "other-data", "random-init", "imported"] as const) {
    const line = describeSplit({ ...base, origin });
    assert.ok(line.includes(`(digest of their indices: ${digest})`), `${origin}: ${line}`);
  }
  const file = describeSplit({
    ...base,
    origin: "imported",
    order: "file",
    spec: "csv:t.csv",
    testCount: 1,
    evaluated: 1,
  });
  assert.match(
    file,
    /; 1 record\); evaluating the first 1 \(digest of their indices: sha256:[0-9a-f]{16}\)$/,
  );
  assert.equal(
    describeSplit({ ...base, origin: "checkpoint" }),
    `held-out test split of mnist (the checkpoint's: seed 5, 4000 train / 2000 test, content and digests checked); evaluating the first 3 held out (digest of their indices: ${digest})`,
  );
});
