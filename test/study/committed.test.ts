import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { committedStudyFor } from "../../src/pipelines/demoRun.ts";
import { readCommittedStudy } from "../../src/study/committed.ts";

const summary = {
  format: "attnlip-study",
  version: 1,
  finished: 4,
  unfinished: [],
  metricNotes: {},
  groups: [{ data: "spam", model: "text-tiny", jasminNorm: "top2", reduce: "max-log", verdict: ["JaSMin lowers X: holds at lambda 1"], lambdas: [{ lambda: 0, seeds: [0, 1], metrics: {} }, { lambda: 1, seeds: [0, 1], metrics: {} }] }],
};

test("the demo puts a committed study's verdict beside its own numbers, naming the task it is about; nothing when none is committed", () => {
  const dir = mkdtempSync(join(tmpdir(), "attnlip-committed-"));
  const folder = pathToFileURL(dir + "/");
  assert.equal(committedStudyFor("text", folder), null);
  writeFileSync(
    join(dir, "study-spam.json"),
    JSON.stringify({ format: "attnlip-committed-study", what: "text-tiny on SpamAssassin", page: "docs/results/study-spam.md", command: "attnlip study ...", wallSeconds: 60, machine: "2 cores", summary }),
  );
  const text = committedStudyFor("text", folder)!;
  assert.match(text.heading, /^What the committed study says \(several seeds; this demo's own table is one seed/);
  assert.deepEqual(text.lines, ["text-tiny on SpamAssassin: 4 runs (2 seeds x 2 lambdas), 95% intervals over seeds; docs/results/study-spam.md", "JaSMin lowers X: holds at lambda 1"]);
  assert.match(committedStudyFor("image", folder)!.heading, /^No study is committed for this task yet\. What the committed study on the other task says/);
  writeFileSync(join(dir, "bad.json"), JSON.stringify({ format: "attnlip-committed-study", what: 3 }));
  assert.throws(() => readCommittedStudy(join(dir, "bad.json")), /bad\.json: what: /);
});
