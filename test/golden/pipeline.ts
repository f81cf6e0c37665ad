// The pipeline whose outputs the golden test pins: train a tiny ViT and a tiny text model,
// analyze and attack them, on fixed seeds. Used by golden.test.ts and by `node --import tsx
// test/golden/pipeline.ts --write` to record the expected outputs (only when a change of the
// numbers is intended, and said so in the commit).
import { mkdtempSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { useBackend } from "../../src/backend.ts";
import { runAnalyze } from "../../src/pipelines/analyzeRun.ts";
import { runAttack } from "../../src/pipelines/attackRun.ts";
import { train } from "../../src/train/trainer.ts";
import { wordPair } from "../helpers/tinyText.ts";

/** Keys whose values depend on time or on temporary paths, dropped before comparing. */
const VOLATILE = new Set(["seconds", "source", "time", "trainSeconds", "dir", "checkpoint"]);

/** A JSON value with the volatile keys removed and the temporary folder written as "<dir>" (recursively). */
export function stable(value: unknown, dir: string): unknown {
  if (Array.isArray(value)) return value.map((v) => stable(v, dir));
  if (typeof value === "string") return value.split(dir).join("<dir>");
  if (value !== null && typeof value === "object")
    return Object.fromEntries(
      Object.entries(value as Record<string, unknown>)
        .filter(([k]) => !VOLATILE.has(k))
        .map(([k, v]) => [k, stable(v, dir)]),
    );
  return value;
}

/** Runs the pipeline in a fresh folder; returns the stable contents of every result file. */
export async function runPipeline(): Promise<Record<string, unknown>> {
  await useBackend("wasm");
  // Its real path: train_state.json records the data file's absolute path with links resolved.
  const dir = realpathSync(mkdtempSync(join(tmpdir(), "attnlip-golden-")));
  const quiet = { progress: "none" as const, log: () => {} };
  const out: Record<string, unknown> = {};
  const keep = (name: string, path: string) => {
    const text = readFileSync(path, "utf8");
    out[name] = path.endsWith(".jsonl")
      ? text
          .trim()
          .split("\n")
          .map((l) => stable(JSON.parse(l), dir))
      : stable(JSON.parse(text), dir);
  };
  const silence = console.log;
  console.log = () => {};
  try {
    const vit = join(dir, "vit");
    await train({
      data: "mnist",
      model: "vit-micro",
      epochs: 1,
      limit: 96,
      testLimit: 64,
      batchSize: 32,
      lr: 3e-3,
      jasmin: { lambda: 0.1 },
      seed: 4,
      out: vit,
      ...quiet,
    });
    keep("vit/train_state.json", join(vit, "train_state.json"));
    keep("vit/metrics.jsonl", join(vit, "metrics.jsonl"));
    await runAnalyze({
      checkpoint: vit,
      model: "vit-micro",
      seed: 1,
      n: 2,
      backend: "wasm",
      mlp: "local",
      headTruth: true,
      blockTruth: true,
      iterations: 1000,
      print: false,
      out: join(vit, "analysis"),
    });
    keep("vit/analysis.json", join(vit, "analysis", "analysis.json"));
    await runAttack({
      checkpoint: vit,
      seed: 2,
      n: 16,
      eps: [0, 0.02, 0.05],
      steps: 3,
      attacks: ["fgsm", "pgd"],
      norm: "linf",
      out: join(vit, "attack.json"),
    });
    keep("vit/attack.json", join(vit, "attack.json"));
    await runAttack({
      checkpoint: vit,
      seed: 2,
      n: 8,
      eps: [0, 0.5],
      steps: 2,
      attacks: ["pgd"],
      norm: "l2",
      out: join(vit, "attack-l2.json"),
    });
    keep("vit/attack-l2.json", join(vit, "attack-l2.json"));

    const csv = join(dir, "texts.csv");
    const rows = ["text,label"];
    for (let i = 0; i < 48; i++)
      rows.push(
        i % 2 === 0
          ? `win cash prize now offer ${wordPair(i)},spam`
          : `see you at the meeting ${wordPair(i)} tomorrow,ham`,
      );
    writeFileSync(csv, rows.join("\n") + "\n");
    const text = join(dir, "text");
    await train({
      data: `csv:${csv}`,
      model: {
        kind: "text",
        vocabSize: 64,
        maxLength: 12,
        dModel: 16,
        heads: 2,
        blocks: 1,
        mlpHidden: 32,
        classes: 2,
        pooling: "cls",
      },
      epochs: 1,
      batchSize: 16,
      lr: 3e-3,
      seed: 6,
      out: text,
      ...quiet,
    });
    keep("text/train_state.json", join(text, "train_state.json"));
    await runAnalyze({
      checkpoint: text,
      model: "text-tiny",
      seed: 1,
      n: 2,
      backend: "wasm",
      mlp: "relaxed",
      headTruth: true,
      blockTruth: true,
      iterations: 1000,
      print: false,
      out: join(text, "analysis"),
    });
    keep("text/analysis.json", join(text, "analysis", "analysis.json"));
    await runAttack({
      checkpoint: text,
      seed: 3,
      n: 8,
      eps: [0, 0.5],
      steps: 2,
      attacks: ["fgsm", "pgd"],
      norm: "l2",
      out: join(text, "attack.json"),
    });
    keep("text/attack.json", join(text, "attack.json"));
  } finally {
    console.log = silence;
  }
  return out;
}

export const GOLDEN = new URL("./expected.json", import.meta.url).pathname;

if (process.argv.includes("--write")) {
  const out = await runPipeline();
  writeFileSync(GOLDEN, JSON.stringify(out) + "\n");
  console.log(`wrote ${GOLDEN}`);
}
