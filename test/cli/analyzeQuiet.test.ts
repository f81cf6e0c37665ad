// runAnalyze({ print: false }) writes nothing to stderr (issue 38, case 14): the progress
// lines and the notes went there whatever `print` said.
import { test } from "node:test";
import assert from "node:assert/strict";
import { runAnalyze, type AnalyzeRun } from "../../src/pipelines/analyzeRun.ts";

/** What `work` writes to process.stderr (console.error included). */
async function stderrOf(work: () => Promise<unknown>): Promise<string> {
  const write = process.stderr.write;
  let text = "";
  process.stderr.write = ((chunk: string | Uint8Array) => {
    text += typeof chunk === "string" ? chunk : Buffer.from(chunk).toString("utf8");
    return true;
  }) as typeof process.stderr.write;
  try {
    await work();
  } finally {
    process.stderr.write = write;
  }
  return text;
}

// The BERT fixture on its 4 texts, asked for 10: a note ("using all of them") and progress.
const RUN: AnalyzeRun = {
  checkpoint: "test/fixtures/hf/bert-tiny-random",
  data: "csv:test/fixtures/hf/texts.csv",
  model: "vit-tiny",
  seed: 0,
  n: 10,
  backend: "wasm",
  mlp: "relaxed",
  variants: ["t3-half"],
  headTruth: false,
  blockTruth: false,
  iterations: 20,
  workers: 1,
};

test("runAnalyze with print: false writes nothing to stderr; with print it notes the short data and shows progress", async () => {
  const loud = await stderrOf(() => runAnalyze(RUN));
  assert.match(loud, /analyze: the data has 4 examples; using all of them \(asked for 10\)/);
  const quiet = await stderrOf(async () => {
    const result = await runAnalyze({ ...RUN, print: false });
    assert.equal(result.network.true.length, 4, "all 4 texts analysed");
  });
  assert.equal(quiet, "");
});

test("runAnalyze prints the estimated time before starting when the estimate reaches estimateFrom (60 s by default: not for this tiny model)", async () => {
  const short = { ...RUN, n: 1 };
  const told = await stderrOf(() => runAnalyze({ ...short, estimateFrom: 0 }));
  assert.match(told, /analyze: estimated time: about \d+ s for 1 input \(bounds \d+ s, network true value \d+ s;/);
  // The estimate comes before the first progress line.
  assert.ok(told.indexOf("estimated time") < told.indexOf("analyzed 1/1"), told);
  const untold = await stderrOf(() => runAnalyze(short));
  assert.doesNotMatch(untold, /estimated time/);
  const quiet = await stderrOf(() => runAnalyze({ ...short, estimateFrom: 0, print: false }));
  assert.equal(quiet, "");
});
