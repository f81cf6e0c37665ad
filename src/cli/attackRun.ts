import { join } from "node:path";
import { tf, useBackend } from "../backend.ts";
import { InputError } from "../util/errors.ts";
import { progressLine } from "../util/progressLine.ts";
import { formatNumber, renderTable } from "../util/table.ts";
import type { AttackFlags } from "./attackCommand.ts";
import {
  describeSplit,
  imageEvaluationSplit,
  textEvaluationSplit,
  trainedData,
  type TrainedData,
} from "../data/evaluationInputs.ts";
import type { EvaluationSplit } from "../data/heldOut.ts";
import { isTextDataSpec, textSplitTensors } from "../data/text/dataset.ts";
import type { WordTokenizer } from "../data/text/tokenizer.ts";
import type { TextClassifier } from "../nn/textClassifier.ts";
import { evaluateTextRobustness, textLipschitzProxy } from "../robustness/embedding.ts";
import { writeJsonAtomically } from "../io/atomicWrite.ts";
import { checkOutPath } from "../io/outPath.ts";
import { modelPreset } from "../nn/config.ts";
import { createModel } from "../nn/create.ts";
import type { TransformerClassifier } from "../nn/model.ts";
import { summarize } from "../stats.ts";
import { loadCheckpoint } from "../train/checkpoint.ts";
import { evaluateRobustness } from "../robustness/evaluate.ts";
import { lipschitzProxy } from "../robustness/lipschitzProxy.ts";
import { AttackFileSchema, type AttackRecord } from "../robustness/attackFile.ts";
import { ATTACK_DEFAULTS } from "../robustness/defaults.ts";
import { epsLimit } from "../robustness/options.ts";
import { attackLabel } from "../robustness/registry.ts";

export type { AttackRecord };

/**
 * What `attnlip attack` was asked to do (validated flags plus the checkpoint folder). Every
 * flag may be left out programmatically: the CLI's defaults apply, except that `data`
 * defaults to the checkpoint's own data for a text model (else mnist) and `eps` to
 * {@link DEFAULT_TEXT_EPS} for a text model (else DEFAULT_EPS).
 */
export type AttackRun = Partial<AttackFlags> & {
  checkpoint?: string;
  /** Text files: the text / label columns (default: the checkpoint's, else "text" / "label"). */
  textColumn?: string;
  labelColumn?: string;
  /** Text files: the encoding (default: the checkpoint's, else auto). */
  encoding?: string;
};

/**
 * Default radii for text models, in embedding units (ATTACK_DEFAULTS.eps.text: token
 * embeddings of text-tiny have l_2 norms of order 1 per token after training; the l_2 radius
 * is over the whole sequence).
 */
export const DEFAULT_TEXT_EPS = ATTACK_DEFAULTS.eps.text;

const percent = (v: number | null | undefined) =>
  v === null || v === undefined ? "-" : `${(100 * v).toFixed(2)}%`;

/**
 * Loads the model (checkpoint or preset) and the first n test examples, runs
 * evaluateRobustness and lipschitzProxy (images, input space, clipped to [0, 1]) or
 * evaluateTextRobustness and textLipschitzProxy (text, token-embedding space, padding rows
 * untouched, no clipping), prints the table and the proxy line, and writes attack.json
 * atomically (to run.out, else CHECKPOINT/attack.json; not at all for a random init without
 * --out). Same attack.json schema for both (attackFile.ts: robust accuracy and zero-gradient
 * fraction per registered attack and eps); eps and radii are in input units (pixels) or
 * embedding units (text).
 *
 * @throws InputError on an --out that cannot be written (checked before the work starts),
 *   image data for a text model (or text data for a ViT), data whose images do not fit the
 *   model, an eps above what the images allow (l_inf: the width of the data set's pixel
 *   range; l_2: its diameter, width * sqrt(H W C); text embeddings have no upper limit);
 *   CheckpointError (an InputError) on a missing or broken checkpoint; InputError on
 *   unreadable text data, a missing column or an unknown label.
 * @example await runAttack({ checkpoint: "runs/jasmin", eps: [0, 0.05], attacks: ["pgd"] }) // writes runs/jasmin/attack.json
 */
export async function runAttack(request: AttackRun): Promise<AttackRecord> {
  const started = performance.now();
  const defaults = attackRunDefaults();
  const given = Object.fromEntries(
    Object.entries(request).filter(([, v]) => v !== undefined),
  ) as AttackRun;
  const partial = { ...defaults, ...given };
  await useBackend(partial.backend);
  let model: TransformerClassifier;
  let source: string;
  let tokenizer: WordTokenizer | null = null;
  let trained: TrainedData | null = null;
  if (partial.checkpoint !== undefined) {
    const ckpt = await loadCheckpoint(partial.checkpoint);
    model = ckpt.model as TransformerClassifier;
    tokenizer = ckpt.tokenizer;
    trained = trainedData(ckpt);
    source = partial.checkpoint;
  } else {
    let config;
    try {
      config = modelPreset(partial.model);
    } catch (error) {
      throw new InputError(`attack: --model: ${(error as Error).message}`);
    }
    model = createModel(config, partial.seed) as TransformerClassifier;
    source = `${partial.model} (random init, seed ${partial.seed})`;
  }
  const out =
    partial.out ??
    (partial.checkpoint !== undefined ? join(partial.checkpoint, "attack.json") : undefined);
  const text = model.config.kind === "text";
  const run = {
    ...partial,
    data: given.data ?? trained?.spec ?? (text ? "spam" : "mnist"),
    eps: given.eps ?? [...ATTACK_DEFAULTS.eps[text ? "text" : "image"][partial.norm]],
  };
  try {
    // Before any work: an --out that cannot be written is refused now, not after the attack.
    if (out !== undefined)
      checkOutPath(
        out,
        "file",
        partial.out !== undefined ? "--out" : "--out [CHECKPOINT/attack.json]",
        "attack",
      );
    if (text && !isTextDataSpec(run.data))
      throw new InputError(
        `attack: --data: a text model needs text data (spam, csv:FILE or jsonl:FILE), got "${run.data}"`,
      );
    if (!text && isTextDataSpec(run.data))
      throw new InputError(`attack: --data: "${run.data}" is text data; this model is a ViT`);
    let prepared: Prepared;
    if (text)
      prepared = await prepareText(
        model as unknown as TextClassifier,
        run,
        source,
        tokenizer,
        trained,
      );
    else prepared = await prepareImages(model, run, source, trained);
    const { evaluation, proxy, count, spec, split } = prepared;
    const attacks = [...new Set(run.attacks)];
    const results = evaluation.results.map((r) => ({
      eps: r.eps,
      robust: Object.fromEntries(attacks.map((a) => [a, r.attacks[a]?.robustAccuracy ?? null])),
      zeroGradient: Object.fromEntries(
        attacks.map((a) => [a, r.attacks[a]?.zeroGradientFraction ?? null]),
      ),
    }));
    console.log(
      renderTable(
        ["eps", ...attacks.map((a) => `${attackLabel(a)} robust acc`), "clean acc"],
        results.map((r) => [
          formatNumber(r.eps),
          ...attacks.map((a) => percent(r.robust[a])),
          percent(evaluation.cleanAccuracy),
        ]),
      ),
    );
    const masked = results.flatMap((r) =>
      attacks
        .filter((a) => (r.zeroGradient[a] ?? 0) > 0)
        .map(
          (a) => `${attackLabel(a)} at eps ${formatNumber(r.eps)}: ${percent(r.zeroGradient[a])}`,
        ),
    );
    if (masked.length > 0)
      console.error(
        `attack: warning: inputs with an exactly zero loss gradient (robust accuracy there is gradient masking, not robustness): ${masked.join("; ")}`,
      );
    const finite = Array.from(proxy.radii).filter(Number.isFinite);
    const s = finite.length > 0 ? summarize(finite, "proxy radii") : null;
    console.log(
      `Lipschitz proxy radius (l_2 in ${text ? "embedding" : "input"} units, margin / (sqrt(2) L), local: a proxy, not a certificate): median ${formatNumber(s?.median)}` +
        ` (q1 ${formatNumber(s?.q1)}, q3 ${formatNumber(s?.q3)}); ${proxy.misclassified} of ${count} misclassified (radius 0)`,
    );
    const doc: AttackRecord = {
      model: model.config,
      source: run.checkpoint ?? source,
      data: spec,
      split,
      n: count,
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
    AttackFileSchema.parse(doc); // the reader's schema: what is written can be read back
    if (out !== undefined) {
      await writeJsonAtomically(out, doc);
      console.log(`wrote ${out} (${doc.seconds.toFixed(1)} s)`);
    } else console.log(`took ${doc.seconds.toFixed(1)} s (give --out FILE to write attack.json)`);
    return doc;
  } finally {
    model.dispose();
  }
}

/** Flag defaults (the CLI's, from ATTACK_DEFAULTS), with `eps` and `data` resolved later by model kind. */
function attackRunDefaults(): AttackFlags {
  const d = ATTACK_DEFAULTS;
  return {
    model: d.model,
    randomInit: false,
    data: d.data,
    norm: d.norm,
    eps: [...d.eps.image[d.norm]],
    steps: d.steps,
    stepSize: d.stepSize,
    n: d.n,
    batch: d.batch,
    seed: d.seed,
    attacks: [...d.attacks],
    backend: d.backend,
  };
}

type ResolvedRun = AttackFlags & {
  checkpoint?: string;
  textColumn?: string;
  labelColumn?: string;
  encoding?: string;
};

interface Prepared {
  evaluation: ReturnType<typeof evaluateRobustness>;
  proxy: ReturnType<typeof lipschitzProxy>;
  count: number;
  spec: string;
  split: EvaluationSplit;
}

/** Library InputErrors (data, held-out checks) become the CLI's one-line usage errors. */
function asInputError(e: unknown): never {
  if (e instanceof InputError)
    throw new InputError(e.message.startsWith("attack:") ? e.message : `attack: ${e.message}`);
  throw e;
}

/**
 * Says what is about to be attacked (and that the split is smaller than asked, when it is),
 * and starts the progress line over (batch, eps, attack) units.
 */
function announce(
  run: ResolvedRun,
  source: string,
  count: number,
  what: string,
  split: EvaluationSplit,
) {
  if (count < run.n)
    console.error(
      `attack: the test split has ${count} held-out examples; using all of them (asked for ${run.n})`,
    );
  const p = progressLine(
    "attack",
    (done, total) => `  attacked ${done}/${total} (batch, eps, attack) units`,
  );
  console.log(
    `attacking ${source} on ${count} ${what}: ${run.norm}, ${run.attacks.join(" + ")}, ` +
      `${run.steps} PGD steps, step size ${run.stepSize ?? "2.5 * eps / steps"} (${run.backend} backend)`,
  );
  console.log(`  data: ${describeSplit(split)}`);
  return p;
}

/** The evaluation settings both input spaces share: the attacks, radii and steps of the flags. */
function evaluationOptions(run: ResolvedRun, onProgress: (done: number, total: number) => void) {
  return {
    attack: run.attacks,
    norm: run.norm,
    eps: run.eps,
    steps: run.steps,
    stepSize: run.stepSize,
    batchSize: run.batch,
    seed: run.seed,
    onWarning: (m: string) => console.error(`attack: warning: ${m}`),
    onProgress,
  };
}

/** The text path: test texts encoded with the checkpoint's tokenizer, attacks in embedding space. */
async function prepareText(
  model: TextClassifier,
  run: ResolvedRun,
  source: string,
  tokenizer: WordTokenizer | null,
  trained: TrainedData | null,
): Promise<Prepared> {
  // The checkpoint's own columns and encoding are applied by textEvaluationSplit when the data is its own.
  const chosen = await textEvaluationSplit(
    { who: "attack", data: run.data, trained, seed: run.seed, n: run.n },
    {
      classes: model.config.classes,
      tokenizer: tokenizer ?? undefined,
      vocabSize: model.config.vocabSize,
      maxLength: model.config.maxLength,
      labelNames: trained?.labels,
      textColumn: run.textColumn,
      labelColumn: run.labelColumn,
      encoding: run.encoding,
    },
  ).catch(asInputError);
  const count = chosen.split.count;
  const inputs = {
    spec: chosen.spec,
    split: chosen.split,
    labelNames: chosen.labelNames,
    ...textSplitTensors(chosen.split),
  };
  const p = announce(
    run,
    source,
    count,
    "test texts in token-embedding space (no clipping)",
    chosen.info,
  );
  try {
    const evaluation = evaluateTextRobustness(
      model,
      inputs,
      inputs.split.labels,
      evaluationOptions(run, p.onProgress),
    );
    p.end();
    const proxy = textLipschitzProxy(model, inputs, inputs.split.labels, { batchSize: run.batch });
    return { evaluation, proxy, count, spec: inputs.spec, split: chosen.info };
  } finally {
    tf.dispose([inputs.ids, inputs.mask]);
  }
}

/**
 * Checks the radii against the input space of images (the text path has none: the embedding
 * space is unbounded): l_inf at most the width of the data set's pixel range, l_2 at most its
 * diameter, width * sqrt(H W C) (28 for MNIST, about 55.4 for CIFAR-10's 32x32x3).
 *
 * @param range the data set's pixel range (ImageDataset.range); @param shape [H, W, C] of one image.
 * @throws InputError `attack: --eps: E is out of range for --norm N (at most MAX, what MAX is)`.
 * @example checkImageEps([60], "l2", [0, 1], [32, 32, 3], "cifar10:DIR") // throws: at most 55.4256
 */
export function checkImageEps(
  eps: readonly number[],
  norm: "linf" | "l2",
  range: readonly [number, number],
  shape: readonly [number, number, number],
  spec: string,
): void {
  const [h, w, c] = shape;
  const limit = epsLimit(norm, range, h * w * c);
  const tooBig = limit === null ? undefined : eps.find((e) => e > limit.max);
  if (limit === null || tooBig === undefined) return;
  const pixels = `the pixel range [${range[0]}, ${range[1]}] of ${spec}`;
  const width = range[1] - range[0];
  const what =
    norm === "linf"
      ? `the width of ${pixels}` +
        (tooBig >= 1 && width <= 1 ? `; for 8/255 write ${(tooBig / 255).toPrecision(4)}` : "")
      : `the l_2 diameter of ${h}x${w}x${c} images in ${pixels}, ${formatNumber(width)} * sqrt(${h}*${w}*${c})`;
  throw new InputError(
    `attack: --eps: ${tooBig} is out of range for --norm ${norm} (at most ${formatNumber(limit.max)}, ${what})`,
  );
}

/** The image path: input space, clipped to the data set's pixel range. */
async function prepareImages(
  model: TransformerClassifier,
  run: ResolvedRun,
  source: string,
  trained: TrainedData | null,
): Promise<Prepared> {
  if (model.config.kind !== "vit")
    throw new InputError("attack: input-space attacks need a ViT; this is a text model");
  const chosen = await imageEvaluationSplit({
    who: "attack",
    data: run.data,
    trained,
    seed: run.seed,
    n: run.n,
  }).catch(asInputError);
  const split = chosen.split;
  const [h, w, c] = split.shape;
  const { imageSize, channels } = model.config;
  if (h !== imageSize || w !== imageSize || c !== channels)
    throw new InputError(
      `attack: --data: images are ${h}x${w}x${c}, the model expects ${imageSize}x${imageSize}x${channels}`,
    );
  checkImageEps(run.eps, run.norm, chosen.range, split.shape, chosen.spec);
  const images = tf.tensor4d(split.images, [split.count, h, w, c]);
  const p = announce(run, source, split.count, "test examples", chosen.info);
  let evaluation, proxy;
  try {
    evaluation = evaluateRobustness(model, images, split.labels, {
      clip: chosen.range,
      ...evaluationOptions(run, p.onProgress),
    });
    p.end();
    proxy = lipschitzProxy(model, images, split.labels, { batchSize: run.batch });
  } finally {
    images.dispose();
  }
  return { evaluation, proxy, count: split.count, spec: chosen.spec, split: chosen.info };
}
