import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { unreadSettingWarnings, parseAttackFlags } from "../../src/cli/attackCommand.ts";
import { InputError } from "../../src/util/errors.ts";
import { runAttnlipHere } from "../helpers/cli.ts";

const bin = fileURLToPath(new URL("../../bin/attnlip.js", import.meta.url));
const dir = mkdtempSync(join(tmpdir(), "attnlip-attack-"));

/** Runs `attnlip ...` asynchronously (so several can run at once). */
function attnlip(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [bin, ...args], { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

// The tiny ViT of these tests: the `vit-micro` preset (patch 7, 17 tokens, d 16, 2 heads, 1 block).
const TINY_PRESET = "vit-micro";

test("a setting flag that none of the chosen attacks reads gets a warning, and the header names each setting's attacks", () => {
  assert.deepEqual(unreadSettingWarnings({ stepSize: "0.1" }, ["apgd"]), [
    "attack: warning: --step-size is not read by apgd (it is read by pgd)",
  ]);
  assert.deepEqual(unreadSettingWarnings({ restarts: "3" }, ["pgd", "fgsm"]), [
    "attack: warning: --restarts is not read by pgd, fgsm (it is read by apgd, apgd-dlr, apgd-t, autoattack)",
  ]);
  assert.deepEqual(unreadSettingWarnings({ steps: "5", stepSize: "0.1" }, ["pgd", "apgd"]), []);
  assert.deepEqual(unreadSettingWarnings({ steps: "5" }, ["fgsm"]), [
    "attack: warning: --steps is not read by fgsm (it is read by pgd, apgd, apgd-dlr, apgd-t, autoattack)",
  ]);
  assert.deepEqual(unreadSettingWarnings({ queries: "100", targets: "3" }, ["apgd"]), [
    "attack: warning: --queries is not read by apgd (it is read by square, autoattack)",
    "attack: warning: --targets is not read by apgd (it is read by apgd-t, autoattack)",
  ]);
  assert.deepEqual(unreadSettingWarnings({ queries: "100", targets: "3" }, ["autoattack"]), []);
});

test("parseAttackFlags fills defaults and names the bad flag in one line", () => {
  const d = parseAttackFlags({});
  assert.deepEqual(
    { ...d },
    {
      model: "vit-tiny",
      randomInit: false,
      data: "mnist",
      norm: "linf",
      eps: [0, 0.05, 0.1, 0.2],
      // Each attack's own: PGD 10, the APGD attacks 100.
      steps: null,
      stepSize: null,
      queries: 5000,
      targets: 9,
      rangeCheck: true,
      n: 64,
      batch: 32,
      seed: 0,
      attacks: ["fgsm", "pgd"],
      restarts: 1,
      backend: "wasm",
      out: undefined,
      force: false,
    },
  );
  assert.deepEqual(parseAttackFlags({ norm: "l2", eps: "0, 1.5,28" }).eps, [0, 1.5, 28]);
  // The parser knows no input space: a radius's upper limit comes from the data (runAttack).
  assert.deepEqual(parseAttackFlags({ eps: "8" }).eps, [8]);
  assert.deepEqual(parseAttackFlags({ norm: "l2", eps: "1e6" }).eps, [1e6]);
  assert.deepEqual(parseAttackFlags({ attack: "pgd" }).attacks, ["pgd"]);
  assert.equal(parseAttackFlags({ stepSize: "0.01" }).stepSize, 0.01);
  assert.equal(parseAttackFlags({ steps: "7" }).steps, 7);
  assert.equal(parseAttackFlags({ queries: "300", targets: "3" }).queries, 300);
  assert.equal(parseAttackFlags({ rangeCheck: false }).rangeCheck, false);
  const cases: [Record<string, string>, RegExp][] = [
    [
      { eps: "-0.1" },
      /^attack: --eps: must be a comma-separated list of finite numbers >= 0, got "-0.1"$/,
    ],
    [
      { eps: "NaN" },
      /^attack: --eps: must be a comma-separated list of finite numbers >= 0, got "NaN"$/,
    ],
    [{ eps: "0.1,,0.2" }, /^attack: --eps: must be a comma-separated list/],
    [
      { eps: "1e400" },
      /^attack: --eps: must be a comma-separated list of finite numbers >= 0, got "1e400"$/,
    ],
    [{ norm: "l1" }, /^attack: --norm: expected linf or l2, got "l1"$/],
    [{ n: "0" }, /^attack: --n: must be an integer from 1 to 10000, got "0"$/],
    [{ n: "2.5" }, /^attack: --n: must be an integer from 1 to 10000, got "2.5"$/],
    [{ n: "many" }, /^attack: --n: must be an integer from 1 to 10000, got "many"$/],
    [{ steps: "0" }, /^attack: --steps: must be an integer from 1 to 10000/],
    [{ stepSize: "0" }, /^attack: --step-size: must be a finite number > 0, got "0"$/],
    [{ batch: "-1" }, /^attack: --batch: must be an integer from 1 to 4096/],
    [{ seed: "5000000000" }, /^attack: --seed: must be an integer from 0 to 4294967295/],
    [
      { attack: "cw" },
      /^attack: --attack: expected pgd, fgsm, apgd, apgd-dlr, apgd-t, square, autoattack or both/,
    ],
    [{ queries: "0" }, /^attack: --queries: must be an integer from 1 to 1000000, got "0"$/],
    [{ targets: "1.5" }, /^attack: --targets: must be an integer from 1 to 1000, got "1.5"$/],
    [{ backend: "gpu" }, /^attack: --backend: expected wasm or cpu/],
    [
      { data: "imagenet" },
      /^attack: --data: expected mnist \| idx:DIR \| cifar10:DIR \| spam \| csv:FILE \| jsonl:FILE, got "imagenet"/,
    ],
  ];
  for (const [raw, pattern] of cases)
    assert.throws(
      () => parseAttackFlags(raw),
      (e: unknown) =>
        e instanceof InputError && pattern.test(e.message) && !e.message.includes("\n"),
      JSON.stringify(raw),
    );
});

test("bad input exits 2 with one clear line", async () => {
  const broken = join(dir, "broken");
  mkdirSync(broken);
  for (const f of ["config.json", "model.safetensors", "optimizer.safetensors", "train_state.json"])
    writeFileSync(
      join(broken, f),
      f === "config.json" ? '{"kind": "vit", "imageSize": ' : "garbage",
    );
  const empty = join(dir, "empty");
  mkdirSync(empty);
  const cases: [string[], RegExp][] = [
    [["attack", join(dir, "nope")], /no such folder/],
    [["attack", empty], /missing config\.json/],
    [["attack", broken], /config\.json is not valid JSON/],
    [
      ["attack", "--random-init", "--eps", "-0.1"],
      /--eps: must be a comma-separated list of finite numbers >= 0/,
    ],
    // The limits of MNIST's input space: pixels in [0, 1], 28x28x1 images.
    [
      ["attack", "--random-init", "--norm", "l2", "--eps", "0.5,28.5"],
      /^attnlip: attack: --eps: 28\.5 is out of range for --norm l2 \(at most 28, the l_2 diameter of 28x28x1 images in the pixel range \[0, 1\] of mnist, 1 \* sqrt\(28\*28\*1\)\)$/,
    ],
    [
      ["attack", "--random-init", "--eps", "8"],
      /^attnlip: attack: --eps: 8 is out of range for --norm linf \(at most 1, the width of the pixel range \[0, 1\] of mnist; for 8\/255 write 0\.03137\)$/,
    ],
    [["attack", "--random-init", "--n", "0"], /--n: must be an integer from 1 to 10000/],
    [["attack", "--random-init", "--model", "resnet"], /--model: unknown model preset "resnet"/],
    [["attack"], /give a checkpoint folder, or --random-init/],
  ];
  // In this process, one after another (no start-up per case); the first case also runs as a separate process, as a user would.
  const results = [];
  for (const [k, [args]] of cases.entries())
    results.push(k === 0 ? await attnlip(args) : await runAttnlipHere(args));
  results.forEach((r, i) => {
    const what = cases[i][0].join(" ");
    assert.equal(r.code, 2, `${what}: exit ${r.code}, stderr ${r.stderr}`);
    const lines = r.stderr.trim().split("\n");
    assert.equal(lines.length, 1, `${what}: one line, got ${JSON.stringify(r.stderr)}`);
    assert.match(lines[0], /^attnlip: /);
    assert.match(lines[0], cases[i][1], what);
  });
  assert.ok(!existsSync(join(broken, "attack.json")), "nothing written on failure");
});

test("attack on a trained checkpoint prints the table and writes attack.json atomically", async () => {
  const ck = join(dir, "ck");
  // Trained in this process (the attacks below run as separate processes).
  const trained = await runAttnlipHere([
    "train",
    "--data",
    "mnist",
    "--model",
    TINY_PRESET,
    "--epochs",
    "1",
    "--limit",
    "256",
    "--test-limit",
    "32",
    "--out",
    ck,
    "--progress",
    "none",
  ]);
  assert.equal(trained.code, 0, trained.stderr);
  const [r, random] = await Promise.all([
    attnlip([
      "attack",
      ck,
      "--n",
      "16",
      "--eps",
      "0,0.02",
      "--steps",
      "3",
      "--batch",
      "8",
      "--seed",
      "2",
    ]),
    attnlip([
      "attack",
      "--random-init",
      "--model",
      "vit-micro",
      "--norm",
      "l2",
      "--eps",
      "0.5",
      "--n",
      "4",
      "--steps",
      "2",
      "--step-size",
      "0.3",
      "--attack",
      "pgd",
      "--out",
      join(dir, "random", "a.json"),
    ]),
  ]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /FGSM robust acc/);
  assert.match(r.stdout, /PGD robust acc/);
  assert.match(r.stdout, /Lipschitz proxy radius .*median/);
  const doc = JSON.parse(readFileSync(join(ck, "attack.json"), "utf8"));
  assert.deepEqual(Object.keys(doc).sort(), [
    "attackSettings",
    "cleanAccuracy",
    "data",
    "masking",
    "model",
    "n",
    "norm",
    "proxy",
    "rangeCheck",
    "results",
    "seconds",
    "seed",
    "source",
    "split",
    "stepSize",
    "steps",
  ]);
  // The command runs the range check by default: the attacks at eps 1, the pixel range's width.
  assert.equal(doc.rangeCheck.eps, 1);
  assert.deepEqual(Object.keys(doc.rangeCheck.robust), ["fgsm", "pgd"]);
  assert.deepEqual(Object.keys(doc.masking).sort(), [
    "gradientFreeOnly",
    "gradientUnusable",
    "lossNotRaised",
    "rangeNotBroken",
    "warnings",
  ]);
  assert.equal(doc.masking.gradientFreeOnly.flag, null, "no gradient-free attack ran");
  assert.match(r.stdout, /^masking checks: broken by Square only not run; range check at eps 1 /m);
  // The checkpoint's own held-out split, whatever --seed says (it seeds only the attack).
  assert.equal(doc.split.origin, "checkpoint");
  assert.equal(doc.split.evaluated, 16);
  assert.deepEqual(doc.model, JSON.parse(readFileSync(join(ck, "config.json"), "utf8")));
  assert.equal(doc.source, ck);
  assert.equal(doc.data, "mnist");
  assert.equal(doc.n, 16);
  assert.equal(doc.norm, "linf");
  assert.equal(doc.steps, 3);
  assert.equal(doc.stepSize, null);
  assert.equal(doc.seed, 2);
  assert.equal(doc.results.length, 2);
  // A second attack never overwrites the first result silently: refused without --force (exit
  // 2, one line, the file intact); --force replaces it.
  const before = readFileSync(join(ck, "attack.json"), "utf8");
  const again = await attnlip(["attack", ck, "--n", "8", "--eps", "0.1", "--attack", "fgsm"]);
  assert.equal(again.code, 2, again.stderr);
  assert.equal(again.stderr.trim().split("\n").length, 1);
  assert.match(
    again.stderr,
    /^attnlip: attack: .*attack\.json exists \(an earlier result\); give --force to replace it, or --out FILE to write elsewhere$/m,
  );
  assert.equal(readFileSync(join(ck, "attack.json"), "utf8"), before, "the first result is intact");
  const forced = await attnlip([
    "attack",
    ck,
    "--n",
    "8",
    "--eps",
    "0.1",
    "--attack",
    "fgsm",
    "--force",
  ]);
  assert.equal(forced.code, 0, forced.stderr);
  assert.equal(JSON.parse(readFileSync(join(ck, "attack.json"), "utf8")).n, 8);
  writeFileSync(join(ck, "attack.json"), before);
  assert.deepEqual(doc.results[0], {
    eps: 0,
    robust: { fgsm: doc.cleanAccuracy, pgd: doc.cleanAccuracy },
    // No attack ran at eps 0: no flags.
    zeroGradient: { fgsm: null, pgd: null },
    nonFiniteGradient: { fgsm: null, pgd: null },
    lossNotRaised: { fgsm: null, pgd: null },
  });
  assert.ok(
    doc.results[1].robust.pgd <= doc.cleanAccuracy &&
      doc.results[1].robust.fgsm <= doc.cleanAccuracy,
  );
  // The fraction of inputs whose loss gradient was exactly zero, per attack (a trained model: none).
  assert.deepEqual(doc.results[1].zeroGradient, { fgsm: 0, pgd: 0 });
  assert.deepEqual(doc.results[1].nonFiniteGradient, { fgsm: 0, pgd: 0 });
  assert.equal(doc.proxy.radii.length, 16);
  assert.ok(doc.proxy.radii.every((v: number) => v >= 0));
  assert.ok(doc.proxy.q1 <= doc.proxy.median && doc.proxy.median <= doc.proxy.q3);
  assert.ok(doc.seconds > 0);

  assert.equal(random.code, 0, random.stderr);
  const rd = JSON.parse(readFileSync(join(dir, "random", "a.json"), "utf8"));
  assert.equal(rd.norm, "l2");
  assert.equal(rd.stepSize, 0.3);
  assert.match(rd.source, /vit-micro \(random init, seed 0\)/);
  assert.equal(rd.results[0].robust.fgsm, undefined, "FGSM was not run");
  assert.equal(typeof rd.results[0].robust.pgd, "number");
  assert.equal(rd.results[0].zeroGradient.fgsm, undefined, "FGSM was not run");
  assert.equal(typeof rd.results[0].zeroGradient.pgd, "number");
});
