import { tf, useBackend, type BackendName } from "../backend.ts";
import { createModel } from "../nn/create.ts";
import { modelPreset } from "../nn/config.ts";
import type { TransformerClassifier } from "../nn/model.ts";
import { loadDataset, takeFirst } from "../data/dataset.ts";
import { loadCheckpoint } from "../train/checkpoint.ts";
import { UsageError } from "../cli/errors.ts";
import { analyze, type Analysis } from "./analyze.ts";
import { analysisTables } from "./table.ts";
import { writeAnalysis } from "./files.ts";

/** What `attnlip analyze` was asked to do. */
export interface AnalyzeRun {
  checkpoint?: string;
  model: string;
  seed: number;
  data: string;
  n: number;
  out?: string;
  backend: BackendName;
  mlp: "local" | "relaxed";
  headTruth: boolean;
  blockTruth: boolean;
  iterations: number;
  /** Print the per-layer tables (default true). */
  print?: boolean;
}

/** Loads the model and the test inputs, runs {@link analyze}, prints the tables and writes the files. */
export async function runAnalyze(run: AnalyzeRun): Promise<Analysis> {
  await useBackend(run.backend);
  let model: TransformerClassifier;
  let source: string;
  if (run.checkpoint !== undefined) {
    model = (await loadCheckpoint(run.checkpoint)).model as TransformerClassifier;
    source = run.checkpoint;
  } else {
    let config;
    try {
      config = modelPreset(run.model);
    } catch (error) {
      throw new UsageError(`--model: ${(error as Error).message}`);
    }
    model = createModel(config, run.seed) as TransformerClassifier;
    source = `${run.model} (random init, seed ${run.seed})`;
  }
  try {
    if (model.config.kind !== "vit")
      throw new UsageError("analyze: text models are analyzed on text data, which is not supported yet; use a ViT");
    const data = await loadDataset(run.data, { seed: run.seed, testLimit: run.n });
    const split = takeFirst(data.test, Math.min(run.n, data.test.count));
    const [h, w, c] = split.shape;
    if (h !== model.config.imageSize || w !== model.config.imageSize || c !== model.config.channels)
      throw new UsageError(
        `--data: images are ${h}x${w}x${c}, the model expects ${model.config.imageSize}x${model.config.imageSize}x${model.config.channels}`,
      );
    const inputs = tf.tensor4d(split.images, [split.count, h, w, c]);
    console.log(`analyzing ${source} on ${split.count} test inputs of ${data.spec} (${run.backend} backend)`);
    const interactive = process.stderr.isTTY;
    const analysis = (() => {
      try {
        return analyze(model, inputs, {
          mlp: run.mlp,
          maxIterations: run.iterations,
          seed: run.seed,
          truth: { heads: run.headTruth, blocks: run.blockTruth },
          onProgress: (done, total) => {
            if (interactive) process.stderr.write(`\r  input ${done}/${total}`);
            else if (done === total || done % Math.max(1, Math.round(total / 4)) === 0)
              console.error(`  analyzed ${done}/${total} inputs`);
          },
        });
      } finally {
        inputs.dispose();
        if (interactive) process.stderr.write("\n");
      }
    })();
    if (run.print !== false) console.log(analysisTables(analysis));
    console.log(
      `bounds took ${analysis.seconds.bounds.toFixed(1)} s, true values ${analysis.seconds.truth.toFixed(1)} s`,
    );
    if (run.out !== undefined) {
      const paths = await writeAnalysis(run.out, analysis, {
        model: model.config,
        source,
        data: data.spec,
        seed: run.seed,
        mlp: run.mlp,
      });
      console.log(`wrote ${paths.join(" and ")}`);
    }
    return analysis;
  } finally {
    model.dispose();
  }
}
