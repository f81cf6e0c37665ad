import { test } from "node:test";
import assert from "node:assert/strict";
import { copyFileSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildReport } from "../../src/report/index.ts";
import { FIXTURES } from "../report/helpers.ts";

// attack.json's zeroGradient fractions reach the report: shown in the robust-accuracy table,
// summarised in the settings, and warned about when above 0.

function runWith(results: object[]): string {
  const dir = mkdtempSync(join(tmpdir(), "attnlip-zero-grad-"));
  copyFileSync(join(FIXTURES.minimal, "analysis.json"), join(dir, "analysis.json"));
  writeFileSync(
    join(dir, "attack.json"),
    JSON.stringify({
      norm: "linf",
      n: 8,
      steps: 3,
      stepSize: null,
      seed: 0,
      cleanAccuracy: 0.75,
      results,
    }),
  );
  return dir;
}

/** The robustness section of a report. */
function robustness(html: string): string {
  const m = /<section id="robustness">[\s\S]*?<\/section>/.exec(html);
  assert.ok(m !== null, "a robustness section");
  return m[0];
}

test("the report shows the zero-gradient fraction per attack and eps, with a warning when above 0", async () => {
  const dir = runWith([
    { eps: 0, pgd: 0.75, fgsm: 0.75, zeroGradient: { pgd: null, fgsm: null } },
    { eps: 0.1, pgd: 0.5, fgsm: 0.625, zeroGradient: { pgd: 0.25, fgsm: 0 } },
  ]);
  const html = robustness(await buildReport([{ dir, name: "masked" }]));
  assert.match(
    html,
    /<p class="warn">Warning: the loss gradient was exactly zero for some inputs \(PGD at epsilon 0\.1: 25\.0%\)/,
  );
  assert.match(html, /gradient masking, not of robustness/);
  // The PGD cell at eps 0.1 carries the fraction; the FGSM cell (0%) does not.
  assert.match(html, /50\.0% <span class="warn"[^>]*>⚠ 25\.0% zero grad\.<\/span>/);
  assert.doesNotMatch(html, /62\.5% <span/);
  assert.match(
    html,
    /inputs with a zero gradient \(max over epsilon\)<\/th><td>PGD 25\.0%, FGSM 0\.0%<\/td>/,
  );
  assert.match(html, /⚠: fraction of inputs whose loss gradient was exactly zero/);
});

test("no warning when no input had a zero gradient; older attack.json files without the field still load", async () => {
  const clean = robustness(
    await buildReport([
      { dir: runWith([{ eps: 0.1, pgd: 0.5, fgsm: 0.625, zeroGradient: { pgd: 0, fgsm: 0 } }]) },
    ]),
  );
  assert.doesNotMatch(clean, /class="warn"/);
  assert.match(clean, /PGD 0\.0%, FGSM 0\.0%/);
  const old = robustness(
    await buildReport([{ dir: runWith([{ eps: 0.1, pgd: 0.5, fgsm: 0.625 }]) }]),
  );
  assert.doesNotMatch(old, /class="warn"/);
  assert.match(
    old,
    /inputs with a zero gradient \(max over epsilon\)<\/th><td class="num">—<\/td>/,
  );
});

test("the report warns once per masking check that fired (attack.json masking.warnings), and not for the others", async () => {
  const dir = runWith([
    { eps: 0.1, robust: { autoattack: 0.25 }, zeroGradient: { autoattack: 0 } },
  ]);
  const path = join(dir, "attack.json");
  const doc = JSON.parse(readFileSync(path, "utf8"));
  const line =
    "the gradient-free attack (Square) broke inputs that every gradient attack left robust (eps 0.1: 2 of 8)";
  doc.masking = {
    gradientFreeOnly: { flag: true, line },
    rangeNotBroken: { flag: false, line: "the gradient attacks broke every input at eps 1" },
    gradientUnusable: { flag: false, line: "fine" },
    lossNotRaised: { flag: null, line: "not run" },
    warnings: [line],
  };
  writeFileSync(path, JSON.stringify(doc));
  const html = robustness(await buildReport([{ dir, name: "masked" }]));
  assert.match(
    html,
    /<p class="warn">Warning: masking check: the gradient-free attack \(Square\) broke inputs that every gradient attack left robust \(eps 0\.1: 2 of 8\)/,
  );
  assert.doesNotMatch(html, /broke every input at eps 1/);
  assert.equal(html.match(/masking check:/g)!.length, 1);
});
