// `attnlip certify` as a user runs it: the files it writes and their schema, results never
// overwritten without --force, l_inf through the norm relation, text models, and the one-line
// refusals (exit code 2) of bad flags and of models it has no rules for.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse } from "csv-parse/sync";
import { CertifyFileSchema } from "../../src/certify/certifyFile.ts";
import { parseCertifyFlags } from "../../src/cli/certifyCommand.ts";
import { runAttnlipHere } from "../helpers/cli.ts";

const MICRO = new URL("../../models/vit-micro-mnist/", import.meta.url).pathname;
const BERT = new URL("../fixtures/hf/bert-tiny-random/", import.meta.url).pathname;
const TEXTS = new URL("../fixtures/hf/texts.csv", import.meta.url).pathname;
const work = mkdtempSync(join(tmpdir(), "attnlip-certify-"));

function readDoc(dir: string) {
  return CertifyFileSchema.parse(JSON.parse(readFileSync(join(dir, "certify.json"), "utf8")));
}

test("certify writes certify.json and certify.csv that read back with their schema and agree with the table", async () => {
  const out = join(work, "l2");
  const r = await runAttnlipHere([
    "certify",
    MICRO,
    "--n",
    "4",
    "--radii",
    "1e-3,0,1e-5",
    "--out",
    out,
  ]);
  assert.equal(r.code, 0, r.stderr);
  const doc = readDoc(out);
  assert.equal(doc.n, 4);
  assert.equal(doc.norm, "l2");
  assert.equal(doc.inputSpace, "image");
  assert.deepEqual(doc.radii, [0, 1e-5, 1e-3]);
  assert.equal(doc.inputs.length, 4);
  for (const x of doc.inputs) {
    assert.equal(x.correct, x.prediction === x.label);
    for (const rule of ["dist", "half"] as const) {
      assert.equal(x[rule].lipschitz.length, 3);
      assert.equal(x[rule].certified.length, 3);
      assert.equal(x[rule].certified[0], x.margin > 0);
      // Certified at a radius exactly when margin > sqrt(2) L r.
      x[rule].certified.forEach((c, k) =>
        assert.equal(c, x.margin > Math.SQRT2 * (x[rule].lipschitz[k] ?? Infinity) * doc.radii[k]),
      );
      assert.ok(x.margin <= 0 || (x[rule].radius ?? Infinity) > 0);
    }
    assert.ok((x.dist.lipschitzAtZero ?? Infinity) < (x.half.lipschitzAtZero ?? Infinity));
  }
  // Certified accuracy: correct and certified, as a share of all inputs.
  doc.summary.certifiedAccuracy.forEach((a, k) => {
    assert.equal(a.radius, doc.radii[k]);
    assert.equal(a.dist, doc.inputs.filter((x) => x.correct && x.dist.certified[k]).length / 4);
  });
  assert.equal(doc.summary.certifiedAccuracy[0].dist, doc.cleanAccuracy);
  assert.ok(doc.summary.medianFactor !== null && doc.summary.medianFactor > 1);
  const rows = parse(readFileSync(join(out, "certify.csv")), { columns: true }) as Record<
    string,
    string
  >[];
  assert.equal(rows.length, 4);
  assert.deepEqual(Object.keys(rows[0]).slice(0, 7), [
    "index",
    "label",
    "prediction",
    "correct",
    "margin",
    "radius_dist",
    "radius_half",
  ]);
  assert.equal(Number(rows[1].radius_dist), doc.inputs[1].dist.radius);
  assert.equal(Number(rows[2]["lipschitz_half_r=0.001"]), doc.inputs[2].half.lipschitz[2]);
  assert.equal(rows[3]["certified_dist_r=0.00001"], doc.inputs[3].dist.certified[1] ? "1" : "0");
  assert.match(r.stdout, /certified accuracy \(distribution-aware\)/);
  assert.match(r.stdout, /median certified radius of the correct inputs/);
});

test("certify never overwrites earlier results without --force, and replaces them with it", async () => {
  const out = join(work, "again");
  assert.equal(
    (await runAttnlipHere(["certify", MICRO, "--n", "2", "--radii", "0", "--out", out])).code,
    0,
  );
  const before = statSync(join(out, "certify.json")).mtimeMs;
  const r = await runAttnlipHere(["certify", MICRO, "--n", "3", "--radii", "0", "--out", out]);
  assert.equal(r.code, 2);
  assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
  assert.match(r.stderr, /certify\.json exists .*--force/);
  assert.equal(statSync(join(out, "certify.json")).mtimeMs, before);
  assert.equal(readDoc(out).n, 2);
  const forced = await runAttnlipHere([
    "certify",
    MICRO,
    "--n",
    "3",
    "--radii",
    "0",
    "--out",
    out,
    "--force",
  ]);
  assert.equal(forced.code, 0, forced.stderr);
  assert.equal(readDoc(out).n, 3);
});

test("--norm linf certifies through ||d||_2 <= sqrt(D) ||d||_inf: the l_2 radius over sqrt(784) for MNIST", async () => {
  const l2 = join(work, "l2-pair");
  const linf = join(work, "linf-pair");
  assert.equal(
    (await runAttnlipHere(["certify", MICRO, "--n", "3", "--radii", "0", "--out", l2])).code,
    0,
  );
  const r = await runAttnlipHere([
    "certify",
    MICRO,
    "--n",
    "3",
    "--norm",
    "linf",
    "--radii",
    "0,1e-7",
    "--out",
    linf,
  ]);
  assert.equal(r.code, 0, r.stderr);
  const a = readDoc(l2);
  const b = readDoc(linf);
  assert.equal(b.norm, "linf");
  b.inputs.forEach((x, i) => {
    for (const rule of ["dist", "half"] as const) {
      const rl2 = a.inputs[i][rule].radius as number;
      assert.ok(Math.abs((x[rule].radius as number) * 28 - rl2) <= 1e-12 * rl2);
    }
  });
});

test("a text model is certified in token-embedding space (the Hugging Face BERT fixture)", async () => {
  const out = join(work, "bert");
  const r = await runAttnlipHere([
    "certify",
    BERT,
    "--data",
    `csv:${TEXTS}`,
    "--n",
    "2",
    "--radii",
    "0,1e-9",
    "--out",
    out,
  ]);
  assert.equal(r.code, 0, r.stderr);
  const doc = readDoc(out);
  assert.equal(doc.inputSpace, "embedding");
  assert.equal(doc.units, "embedding");
  assert.equal(doc.inputs.length, 2);
});

test("bad flags and models without over-the-ball rules are refused in one line with exit code 2", async () => {
  const cases: [string[], RegExp][] = [
    [["certify", MICRO, "--norm", "l3"], /certify: --norm: expected l2 or linf/],
    [
      ["certify", MICRO, "--radii", "0,-1"],
      /certify: --radii: must be a comma-separated list of finite numbers >= 0, got "0,-1"/,
    ],
    [["certify", MICRO, "--radii", "abc"], /certify: --radii: .*"abc"/],
    [["certify", MICRO, "--n", "0"], /certify: --n: must be an integer from 1 to 100000, got "0"/],
    [["certify", MICRO, "--seed", "1.5"], /certify: --seed: .*"1.5"/],
    [["certify", MICRO, "--backend", "gpu"], /certify: --backend: expected/],
    [["certify"], /certify: give a checkpoint folder, or --random-init with --model/],
    [
      ["certify", MICRO, "--random-init"],
      /certify: give either a checkpoint folder or --random-init, not both/,
    ],
    [["certify", MICRO, "--model", "vit-tiny"], /certify: --model applies with --random-init only/],
    [["certify", "--random-init", "--model", "nope"], /certify: --model: /],
    [["certify", join(work, "missing")], /checkpoint .*missing: no such folder/],
    [
      ["certify", "--random-init", "--model", "vit-micro-l2", "--n", "1"],
      /certify: layer blocks\.0\.attn is of kind "l2Attention", which has no over-the-ball rule/,
    ],
  ];
  for (const [args, pattern] of cases) {
    const r = await runAttnlipHere(args);
    assert.equal(r.code, 2, `${args.join(" ")}: exit ${r.code}, ${r.stderr}`);
    const lines = r.stderr
      .trim()
      .split("\n")
      .filter((l) => !/^certify: (analyzed|input )/.test(l));
    assert.equal(lines.length, 1, `${args.join(" ")}: ${r.stderr}`);
    assert.match(lines[0], pattern);
  }
});

test("parseCertifyFlags fills the defaults and sorts the radii", () => {
  assert.deepEqual(parseCertifyFlags({}), {
    randomInit: false,
    norm: "l2",
    n: 100,
    seed: 0,
    backend: "wasm",
    force: false,
  });
  assert.deepEqual(parseCertifyFlags({ radii: "0.1, 0, 0.1" }).radii, [0, 0.1]);
});
