// The report's certify section: present with its chart and table when the run folder holds
// certify.json (beside attack.json's robust accuracy), absent otherwise, and a malformed
// certify.json refused in one line naming it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { cpSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  summarizeCertificates,
  type CertifiedInput,
  type CertifyFile,
} from "../../src/certify/certifyFile.ts";
import { buildReport } from "../../src/report/report.ts";
import { InputError } from "../../src/util/errors.ts";
import { chartsOf, FIXTURES, markCount } from "../report/helpers.ts";

const work = mkdtempSync(join(tmpdir(), "attnlip-certify-report-"));

/** A certify.json of four inputs (l_inf, as the fixture's attack.json), three correct. */
function certifyDoc(): CertifyFile {
  const radii = [0, 1e-6, 1e-3, 0.05];
  const input = (index: number, correct: boolean, dist: number, half: number): CertifiedInput => {
    const rule = (radius: number) => ({
      radius,
      lipschitzAtZero: 1e4,
      lipschitz: radii.map(() => 1e4),
      certified: radii.map((r) => correct && r <= radius),
      evaluations: 12,
    });
    return {
      index,
      label: 1,
      prediction: correct ? 1 : 2,
      correct,
      margin: correct ? 3 : 1,
      dist: rule(dist),
      half: rule(half),
    };
  };
  const inputs = [
    input(0, true, 2e-3, 1e-4),
    input(1, true, 5e-6, 1e-6),
    input(2, true, 1e-2, 6e-4),
    input(3, false, 1e-3, 1e-4),
  ];
  return {
    n: 4,
    norm: "linf",
    inputSpace: "image",
    units: "input",
    radii,
    cleanAccuracy: 0.75,
    method: { math: "docs/math.md section 7" },
    summary: summarizeCertificates(inputs, radii),
    inputs,
    seconds: 1,
  };
}

function runFolder(name: string, certify: unknown): string {
  const dir = join(work, name);
  cpSync(FIXTURES.baseline, dir, { recursive: true });
  if (certify !== undefined)
    writeFileSync(
      join(dir, "certify.json"),
      typeof certify === "string" ? certify : JSON.stringify(certify),
    );
  return dir;
}

test("the report draws certified accuracy against the radius beside the attack's when certify.json is there", async () => {
  const html = await buildReport([{ dir: runFolder("with", certifyDoc()) }]);
  assert.match(html, /<section id="certify">/);
  assert.match(html, /<a href="#certify">Certified accuracy<\/a>/);
  const chart = chartsOf(html).find((c) => c.id === "certify");
  assert.ok(chart !== undefined, "the certify chart is drawn");
  assert.ok(markCount(chart.svg) > 0, "the chart has marks");
  for (const label of [
    "certified (distribution-aware)",
    "certified (1/2)",
    "robust under the strongest attack",
  ])
    assert.ok(chart.svg.includes(label), `the legend names ${label}`);
  // The summary: three of four correct, medians over them.
  assert.match(
    html,
    /median certified radius of the correct inputs 0\.002 \(distribution-aware\) and 1\.000e-4 \(1\/2\)/,
  );
});

test("without certify.json the report has no certify section", async () => {
  const html = await buildReport([{ dir: runFolder("without", undefined) }]);
  assert.doesNotMatch(html, /<section id="certify">/);
  assert.equal(
    chartsOf(html).find((c) => c.id === "certify"),
    undefined,
  );
});

test("a malformed certify.json is refused naming the file", async () => {
  const dir = runFolder("broken", { ...certifyDoc(), norm: "l3" });
  await assert.rejects(
    buildReport([{ dir }]),
    (e: unknown) => e instanceof InputError && /certify\.json: .*norm/.test(e.message),
  );
  const bad = runFolder("notjson", "{");
  await assert.rejects(
    buildReport([{ dir: bad }]),
    (e: unknown) => e instanceof InputError && /certify\.json: invalid JSON/.test(e.message),
  );
});
