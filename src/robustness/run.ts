import { join } from "node:path";
import { tf, useBackend } from "../backend.ts";
import { UsageError } from "../cli/errors.ts";
import { formatNumber, renderTable } from "../cli/table.ts";
import type { AttackFlags } from "../cli/attackCommand.ts";
import { loadDataset, takeFirst } from "../data/dataset.ts";
import { writeJsonAtomically } from "../io/atomicWrite.ts";
import { modelPreset } from "../nn/config.ts";
import { createModel } from "../nn/create.ts";
import type { TransformerClassifier } from "../nn/model.ts";
import { summarize } from "../stats.ts";
import { loadCheckpoint } from "../train/checkpoint.ts";
import { evaluateRobustness } from "./evaluate.ts";
import { lipschitzProxy } from "./lipschitzProxy.ts";

/** What `attnlip attack` was asked to do (validated flags plus the checkpoint folder). */
export interface AttackRun extends AttackFlags {
  checkpoint?: string;
}

/** The attack.json document (the report reads it). */
export interface AttackFile {
  model: unknown;
  source: string;
  data: string;
  n: number;
  norm: "linf" | "l2";
  steps: number;
  /** null = the default rule 2.5 * eps / steps. */
  stepSize: number | null;
  seed: number;
  cleanAccuracy: number;
  /** Robust accuracy per eps; null for an attack that was not run. */
  results: { eps: number; pgd: number | null; fgsm: number | null }[];
  /** l_2 radii margin / (sqrt(2) L) (input units), 0 for misclassified examples. */
  proxy: {
    median: number | null;
    q1: number | null;
    q3: number | null;
    misclassified: number;
    radii: (number | null)[];
  };
  seconds: number;
}

const percent = (v: number | null | undefined) =>
  v === null || v === undefined ? "-" : `${(100 * v).toFixed(2)}%`;

/**
 * Loads the model (checkpoint or preset) and the first n test examples, runs
 * evaluateRobustness and lipschitzProxy, prints the table and the proxy line, and writes
 * attack.json atomically (to run.out, else CHECKPOINT/attack.json; not at all for a random
 * init without --out).
 *
 * @throws UsageError on a text model, data whose images do not fit the model, or an l_2
 *   eps above sqrt(H W C); CheckpointError (an InputError) on a missing or broken checkpoint.
 */
export async function runAttack(run: AttackRun): Promise<AttackFile> {
  const started = performance.now();
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
      throw new UsageError(`attack: --model: ${(error as Error).message}`);
    }
    model = createModel(config, run.seed) as TransformerClassifier;
    source = `${run.model} (random init, seed ${run.seed})`;
  }
  try {
    if (model.config.kind !== "vit")
      throw new UsageError("attack: input-space attacks need a ViT; this is a text model");
    const data = await loadDataset(run.data, { seed: run.seed, testLimit: run.n });
    const split = takeFirst(data.test, Math.min(run.n, data.test.count));
    const [h, w, c] = split.shape;
    const { imageSize, channels } = model.config;
    if (h !== imageSize || w !== imageSize || c !== channels)
      throw new UsageError(
        `attack: --data: images are ${h}x${w}x${c}, the model expects ${imageSize}x${imageSize}x${channels}`,
      );
    const diameter = Math.sqrt(h * w * c);
    const tooBig = run.eps.find((e) => run.norm === "l2" && e > diameter);
    if (tooBig !== undefined)
      throw new UsageError(
        `attack: --eps: ${tooBig} exceeds the l_2 diameter ${formatNumber(diameter)} of these images`,
      );
    if (split.count < run.n)
      console.error(
        `attack: the test split has ${split.count} examples; using all of them (asked for ${run.n})`,
      );
    const images = tf.tensor4d(split.images, [split.count, h, w, c]);
    const interactive = process.stderr.isTTY;
    console.log(
      `attacking ${source} on ${split.count} test examples of ${data.spec}: ${run.norm}, ${run.attacks.join(" + ")}, ` +
        `${run.steps} PGD steps, step size ${run.stepSize ?? "2.5 * eps / steps"} (${run.backend} backend)`,
    );
    let evaluation, proxy;
    try {
      evaluation = evaluateRobustness(model, images, split.labels, {
        attack: run.attacks,
        norm: run.norm,
        eps: run.eps,
        steps: run.steps,
        stepSize: run.stepSize,
        batchSize: run.batch,
        seed: run.seed,
        onWarning: (m) => console.error(`attack: warning: ${m}`),
        onProgress: (done, total) => {
          if (interactive) process.stderr.write(`\r  attack ${done}/${total}`);
          else if (done === total || done % Math.max(1, Math.round(total / 4)) === 0)
            console.error(`  attacked ${done}/${total} (batch, eps, attack) units`);
        },
      });
      if (interactive) process.stderr.write("\n");
      proxy = lipschitzProxy(model, images, split.labels, { batchSize: run.batch });
    } finally {
      images.dispose();
    }
    const results = evaluation.results.map((r) => ({
      eps: r.eps,
      pgd: r.pgd?.robustAccuracy ?? null,
      fgsm: r.fgsm?.robustAccuracy ?? null,
    }));
    console.log(
      renderTable(
        ["eps", "FGSM robust acc", "PGD robust acc", "clean acc"],
        results.map((r) => [
          formatNumber(r.eps),
          percent(r.fgsm),
          percent(r.pgd),
          percent(evaluation.cleanAccuracy),
        ]),
      ),
    );
    const finite = Array.from(proxy.radii).filter(Number.isFinite);
    const s = finite.length > 0 ? summarize(finite, "proxy radii") : null;
    console.log(
      `Lipschitz proxy radius (l_2, margin / (sqrt(2) L), local: a proxy, not a certificate): median ${formatNumber(s?.median)}` +
        ` (q1 ${formatNumber(s?.q1)}, q3 ${formatNumber(s?.q3)}); ${proxy.misclassified} of ${split.count} misclassified (radius 0)`,
    );
    const doc: AttackFile = {
      model: model.config,
      source: run.checkpoint ?? source,
      data: data.spec,
      n: split.count,
      norm: run.norm,
      steps: run.steps,
      stepSize: run.stepSize,
      seed: run.seed,
      cleanAccuracy: evaluation.cleanAccuracy,
      results,
      proxy: {
        median: s?.median ?? null,
        q1: s?.q1 ?? null,
        q3: s?.q3 ?? null,
        misclassified: proxy.misclassified,
        radii: Array.from(proxy.radii, (r) => (Number.isFinite(r) ? r : null)),
      },
      seconds: (performance.now() - started) / 1000,
    };
    const out =
      run.out ?? (run.checkpoint !== undefined ? join(run.checkpoint, "attack.json") : undefined);
    if (out !== undefined) {
      await writeJsonAtomically(out, doc);
      console.log(`wrote ${out} (${doc.seconds.toFixed(1)} s)`);
    } else console.log(`took ${doc.seconds.toFixed(1)} s (give --out FILE to write attack.json)`);
    return doc;
  } finally {
    model.dispose();
  }
}
