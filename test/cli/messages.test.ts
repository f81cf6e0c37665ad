// The command line's messages (issue 38, case 14): the /255 advice computes the value given,
// help pages name every model folder the commands read and write defaults one way, and an
// unknown option of `sigma` is called one.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Argument, Command, Option } from "commander";
import { buildProgram } from "../../src/cli/program.ts";
import { checkEps } from "../../src/robustness/options.ts";
import { per255Advice } from "../../src/util/per255.ts";
import { runAttnlipHere } from "../helpers/cli.ts";

/** The one line a refused command printed (exit 2). */
async function refusal(args: string[]): Promise<string> {
  const r = await runAttnlipHere(args);
  assert.equal(r.code, 2, `${args.join(" ")}: ${r.stdout}${r.stderr}`);
  const lines = r.stderr.trim().split("\n");
  assert.equal(lines.length, 1, r.stderr);
  return lines[0];
}

test("the /255 advice is for the value given, and only when value/255 is in range", async () => {
  assert.equal(per255Advice(20, 1), "for 20/255 write 0.07843");
  assert.equal(per255Advice(8, 1), "for 8/255 write 0.03137");
  assert.equal(per255Advice(255, 1), "for 255/255 write 1");
  assert.equal(per255Advice(1e9, 1), null, "1e9/255 is out of range too");
  assert.equal(per255Advice(256, 1), null);
  assert.equal(per255Advice(0.5, 1), null, "below 1: not a 0-255 value");
  assert.equal(per255Advice(20, 255), null, "a 0-255 pixel range takes 20 as it is");
  assert.equal(
    await refusal(["attack", "--random-init", "--eps", "0,20"]),
    "attnlip: attack: --eps: 20 is out of range for --norm linf (at most 1, the width of the pixel range [0, 1] of mnist; for 20/255 write 0.07843)",
  );
  assert.equal(
    await refusal(["attack", "--random-init", "--eps", "1e9"]),
    "attnlip: attack: --eps: 1000000000 is out of range for --norm linf (at most 1, the width of the pixel range [0, 1] of mnist)",
  );
  assert.throws(
    () => checkEps(20, "linf", [0, 1], "pgd"),
    /^RangeError: pgd: eps 20 is larger than .* \(for 20\/255 write 0\.07843\)$/,
  );
  assert.throws(
    () => checkEps(1e9, "linf", [0, 1], "pgd"),
    (e: Error) => !e.message.includes("/255"),
  );
  const study = join(mkdtempSync(join(tmpdir(), "attnlip-messages-")), "s");
  assert.match(
    await refusal(["study", study, "--eps-linf", "0,20"]),
    /--eps-linf: 20 is out of range \(at most 1, .*; for 20\/255 write 0\.07843\)$/,
  );
  assert.doesNotMatch(await refusal(["study", study, "--eps-linf", "0,1e9"]), /\/255/);
});

test("analyze --help and attack --help name every Hugging Face architecture they read (ViT, BERT, GPT-2)", async () => {
  for (const command of ["analyze", "attack"]) {
    const r = await runAttnlipHere([command, "--help"]);
    assert.equal(r.code, 0);
    const help = r.stdout.replace(/\s+/g, " ");
    for (const name of [
      "ViTForImageClassification",
      "BertForSequenceClassification",
      "GPT2ForSequenceClassification",
      "ViTModel",
      "BertModel",
      "GPT2Model",
    ])
      assert.ok(help.includes(name), `${command} --help: ${name}`);
  }
});

test("every --help page writes defaults one way, commander's (default: X)", async () => {
  const program = buildProgram();
  const items = (c: Command) => [
    ...c.options.map((o: Option) => ({ what: `${c.name()} ${o.flags}`, text: o.description })),
    ...(c.registeredArguments as Argument[]).map((a) => ({
      what: `${c.name()} ${a.name()}`,
      text: a.description,
    })),
  ];
  for (const command of program.commands)
    for (const { what, text } of items(command)) {
      assert.doesNotMatch(text, /\[[^\]]*\]\.?$/, `${what}: a hand-written [default] in "${text}"`);
      assert.doesNotMatch(text, /\(default/, `${what}: a hand-written (default ...) in "${text}"`);
    }
  const r = await runAttnlipHere(["train", "--help"]);
  assert.match(r.stdout, /--epochs <n> +epochs; with --resume, the new total \(default: 3\)/);
  const analyze = (await runAttnlipHere(["analyze", "--help"])).stdout;
  assert.match(
    analyze,
    /--n <int> +number of test inputs \(default: 16\)/,
    "a text default unquoted",
  );
  assert.match(
    analyze,
    /--backend <name> +tfjs backend: wasm or cpu \(default: wasm\)/,
    "an option with choices as the others",
  );
  const explore = (await runAttnlipHere(["explore", "--help"])).stdout.replace(/\s+/g, " ");
  assert.match(
    explore,
    /\(default: the bundled vit-micro trained on MNIST\)/,
    "an argument's default",
  );
});

test("sigma ROW --bogus-flag names the unknown option, not 'too many arguments'", async () => {
  assert.equal(
    await refusal(["sigma", "0.5,0.3,0.2", "--bogus-flag"]),
    "attnlip: sigma: unknown option '--bogus-flag'",
  );
  assert.equal(
    await refusal(["sigma", "--json", "0.5,0.5", "--bogus=1"]),
    "attnlip: sigma: unknown option '--bogus=1'",
  );
  assert.equal(
    await refusal(["sigma", "0.5,0.5", "0.2,0.8"]),
    "attnlip: sigma: unexpected argument '0.2,0.8' (give one row)",
  );
  const ok = await runAttnlipHere(["sigma", "0.5,0.3,0.2", "--json"]);
  assert.equal(ok.code, 0, ok.stderr);
});
