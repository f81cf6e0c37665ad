// Issue: a mistyped label silently became a new class (a "neutral" among neg/pos built a
// 3-class model). Training on a text file now prints the classes with their counts and warns
// about a class with fewer than 3 examples, naming the label and the line of its first one.
import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { useBackend } from "../../src/backend.ts";
import { classesLine, rareClassWarnings } from "../../src/data/text/classes.ts";
import { loadTextDataset } from "../../src/data/text/dataset.ts";
import { train } from "../../src/train/trainer.ts";
import { tempDir } from "../train/helpers.ts";
import { tinyText } from "../helpers/tinyText.ts";

await useBackend("wasm");

/** 80 neg/pos rows (header on line 1), with extra rows inserted after data row `at`. */
function csv(extra: string[], at: number): string {
  const rows: string[] = [];
  for (let i = 0; i < 80; i++) rows.push(i % 2 === 0 ? `hate it ${i},neg` : `love it ${i},pos`);
  rows.splice(at, 0, ...extra);
  return ["text,label", ...rows].join("\n") + "\n";
}

const TINY_TEXT = tinyText({ vocabSize: 64, classes: 3 });

test("training on a CSV with a mistyped label prints the classes and warns once about it, naming its line", async () => {
  const dir = tempDir("attnlip-classes-");
  const file = join(dir, "d.csv");
  writeFileSync(file, csv(["meh,neutral"], 13)); // data row 14: line 15
  const logged: string[] = [];
  const warned: string[] = [];
  const r = await train({
    data: `csv:${file}`,
    model: TINY_TEXT,
    epochs: 1,
    batchSize: 32,
    progress: "none",
    log: (l) => logged.push(l),
    warn: (l) => warned.push(l),
  });
  r.model.dispose();
  assert.equal(r.trainState.data.labels!.length, 3);
  assert.equal(logged[0], "classes: neg 40, neutral 1, pos 40");
  assert.deepEqual(warned, [
    'warning: label "neutral" occurs once (line 15); a typo? classes: neg 40, neutral 1, pos 40',
  ]);
});

test("a class with two examples is named with its first line; three or more, and the corpus, are not flagged", async () => {
  const dir = tempDir("attnlip-classes-");
  const file = join(dir, "d.csv");
  writeFileSync(file, csv(["so-so,nuetral", "fine,posi", "bah,nuetral", "ok,posi", "hm,posi"], 4));
  const data = await loadTextDataset(`csv:${file}`, { seed: 0 });
  assert.deepEqual(data.labelNames, ["neg", "nuetral", "pos", "posi"]);
  assert.deepEqual(data.classCounts, [40, 2, 40, 3]);
  assert.deepEqual(data.firstLines, [2, 6, 3, 7]);
  assert.equal(classesLine(data), "classes: neg 40, nuetral 2, pos 40, posi 3");
  assert.deepEqual(rareClassWarnings(data), [
    'warning: label "nuetral" occurs twice (first on line 6); a typo? classes: neg 40, nuetral 2, pos 40, posi 3',
  ]);
  // No lines (an embedded corpus): nothing to name, no warning.
  assert.deepEqual(rareClassWarnings({ ...data, firstLines: null }), []);
  // A checkpoint's class absent from the data is not a typo in it.
  assert.deepEqual(
    rareClassWarnings({ labelNames: ["a", "b"], classCounts: [0, 9], firstLines: [0, 2] }),
    [],
  );
});
