// study's refusals of bad input, in a file of their own: they run the CLI in this process
// (runAttnlipHere takes over stdout while it runs), which must not overlap another test's
// report in the same file.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { runAttnlipHere } from "../helpers/cli.ts";
import { tempDir } from "../train/helpers.ts";

test("study: bad input exits 2 with one line naming the flag, before any work", async () => {
  const dir = tempDir("attnlip-study-bad-");
  const cases: [string[], RegExp][] = [
    [["study"], /study: give the study folder/],
    [["study", join(dir, "s"), "--shard", "5/4"], /study: --shard: must be k\/n with 1 <= k <= n .*got "5\/4"/],
    [["study", join(dir, "s"), "--epochs", "abc"], /study: --epochs: must be an integer from 1 to 100000, got "abc"/],
    [["study", join(dir, "s"), "--lambdas", "0,abc"], /study: --lambdas: must be a comma-separated list of finite numbers >= 0, got "0,abc"/],
    [["study", join(dir, "s"), "--attack", "cw"], /study: attack\.attacks \(--attack\): unknown attack "cw"/],
    [["study", join(dir, "s"), "--config", join(dir, "none.json")], /study: --config: cannot read .*none\.json \(ENOENT\)/],
    [["study", "--aggregate", dir], /study: .*: no runs\/ folder: not a study folder/],
    [["study", "--aggregate", dir, "--seeds", "1"], /study: --seeds cannot be given with --aggregate/],
    [["study", join(dir, "s"), "--seeds", "0,0"], /study: seeds \(--seeds\): 0 is listed twice/],
    // Refused before the grid is saved: a folder never keeps a grid whose runs cannot start.
    [["study", join(dir, "s"), "--model", "vit-nope"], /study: --model: "vit-nope" is neither a model preset \(vit-micro, vit-tiny, text-micro, text-tiny, vit-micro-l2, vit-tiny-l2, text-tiny-l2\) nor a Hugging Face folder/],
    [["study", join(dir, "s"), "--data", "mnist,nope"], /study: --data: expected mnist \| .*, got "nope"/],
    [["study", join(dir, "s"), "--data", "idx:/nonexistent-folder"], /study: --data: "idx:\/nonexistent-folder": \/nonexistent-folder does not exist/],
    [["study", join(dir, "s"), "--data", "spam", "--model", "vit-micro"], /study: --model vit-micro reads image data, but --data spam is text data/],
    [["study", join(dir, "s"), "--eps-linf", "0,2"], /study: --eps-linf: 2 is out of range \(at most 1, the width of the pixel range \[0, 1\] of mnist/],
    [["study", join(dir, "s"), "--eps-l2", "29"], /study: --eps-l2: 29 is out of range \(at most 28, the l_2 diameter of 28x28x1 images/],
    [["study", join(dir, "s"), "--attack-n", "8", "--test-limit", "5"], /study: --attack-n 8 is more than --test-limit 5/],
    [["study", join(dir, "s"), "--data", "spam", "--model", "text-micro", "--augment-shift", "2"], /study: --augment-shift: shifts images, but --data spam is text data/],
    [["study", join(dir, "s"), "--augment-shift", "28"], /study: --augment-shift: 28 pixels moves every 28x28 image of mnist out of its frame \(give less than 28\)/],
    [["study", join(dir, "s")], /study: .*s holds no study yet \(no study-grid\.json\): give the grid to start one/],
    [["study", join(dir, "s"), "--pretrain-lr", "0.01"], /study: train\.pretrainLr \(--pretrain-lr\) applies only to a study that pretrains/],
  ];
  for (const [args, message] of cases) {
    const r = await runAttnlipHere(args);
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
    assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
    assert.match(r.stderr, message);
  }
  assert.ok(!existsSync(join(dir, "s")), "nothing written");
  // A folder that holds something else (here a file of another command) is not a study: refused
  // with or without grid flags, and left as it was.
  const other = join(dir, "other");
  mkdirSync(other);
  writeFileSync(join(other, "analysis.json"), "{}");
  for (const args of [["study", other], ["study", other, "--model", "vit-micro"]]) {
    const r = await runAttnlipHere(args);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /^attnlip: study: .*other is not empty and holds no study \(no study-grid\.json\): give a new or empty folder for a new study\n$/);
  }
  assert.deepEqual(readdirSync(other), ["analysis.json"]);
});
