import { join } from "node:path";
import { useBackend, type BackendName } from "../backend.ts";
import { describeSplit } from "../data/evaluationInputs.ts";
import type { HeadVariant } from "../lipschitz/rules/attentionHead.ts";
import { checkOutPath, refuseToReplace } from "../io/outPath.ts";
import { writeFileAtomically, writeJsonAtomically } from "../io/atomicWrite.ts";
import { checkDataTask, modelInputs } from "../robustness/modelInputs/index.ts";
import { defaultRadii } from "../radius/grid.ts";
import { radiusCsv, radiusDocument, radiusTables } from "../radius/document.ts";
import { radiusSweep, type RadiusResult } from "../radius/sweep.ts";
import { buildRadiusReport } from "../report/radius.ts";
import { InputError } from "../util/errors.ts";
import { progressLine } from "../util/progressLine.ts";
import { evaluatedModel } from "./evaluatedModel.ts";
import { refuseInapplicableVariants } from "../lipschitz/applicableVariants.ts";

/** What `attnlip radius` was asked to do (flags parsed). */
export interface RadiusRun {
  checkpoint?: string;
  model: string;
  seed: number;
  data?: string;
  n: number;
  block: number;
  /** [defaultRadii()] */
  radii?: number[];
  /** [2, 4, 8, ... below the full length, and the full length] */
  lengths?: number[];
  lengthRadius: number;
  variants?: readonly HeadVariant[];
  constructed: boolean;
  denseLimit: number;
  iterations: number;
  /** Folder for radius.json, radius.csv and radius.html [nothing written]. */
  out?: string;
  force: boolean;
  backend: BackendName;
}

/** The files the command writes into --out. */
export const RADIUS_FILES = ["radius.json", "radius.csv", "radius.html"] as const;

/** 2, 4, 8, ... below `tokens`, then `tokens`. */
function defaultLengths(tokens: number): number[] {
  const out: number[] = [];
  for (let k = 2; k < tokens; k *= 2) out.push(k);
  out.push(tokens);
  return out;
}

/**
 * Loads the model and its held-out inputs as `analyze` does (src/pipelines/evaluatedModel.ts, the
 * model kind's evaluation inputs), runs {@link radiusSweep}, prints the tables and writes
 * radius.json, radius.csv and radius.html (atomically) to run.out.
 *
 * @throws InputError on an unusable --out, files there without --force (both before any work),
 *   a bad preset, a block outside the model, a length above the sequence length, data that do
 *   not fit the model.
 */
export async function runRadius(run: RadiusRun): Promise<RadiusResult> {
  await useBackend(run.backend);
  if (run.out !== undefined) {
    checkOutPath(run.out, "folder", "--out", "radius");
    refuseToReplace(
      RADIUS_FILES.map((f) => join(run.out!, f)),
      run.force,
      "radius",
      "DIR",
    );
  }
  const { model, source, tokenizer, trained, imported, labels } = await evaluatedModel(
    "radius",
    run.checkpoint,
    run.model,
    run.seed,
  );
  try {
    const blocks = model.config.blocks;
    if (run.block >= blocks)
      throw new InputError(
        `radius: --block: must be an integer from 0 to ${blocks - 1} (the model has ${blocks} block${blocks === 1 ? "" : "s"}), got "${run.block}"`,
      );
    const kind = modelInputs(model.config.kind, "radius");
    const data = run.data ?? trained?.spec ?? kind.defaultData;
    checkDataTask(kind, data, "radius");
    if (run.variants !== undefined)
      refuseInapplicableVariants(model.config.attention, run.variants, "radius: --variants");
    const inputs = await kind
      .load(
        model,
        { who: "radius", data, trained, imported, seed: run.seed, n: run.n },
        { tokenizer, labels },
      )
      .catch((e: unknown) => {
        if (e instanceof InputError && !e.message.startsWith("radius:"))
          throw new InputError(`radius: ${e.message}`);
        throw e;
      });
    try {
      const tokens = tokenCount(model.config, inputs.x.shape[1] as number);
      const lengths = run.lengths ?? defaultLengths(tokens);
      const longest = Math.max(...lengths);
      if (longest > tokens)
        throw new InputError(
          `radius: --lengths: must be at most the sequence length ${tokens}, got "${longest}"`,
        );
      console.log(
        `radius: ${source}, block ${run.block}, ${inputs.count} held-out input(s) (${run.backend} backend)`,
      );
      console.log(`  data: ${describeSplit(inputs.info)}`);
      const progress = progressLine("point", (done, total) => `  measured ${done}/${total} points`);
      let result: RadiusResult;
      try {
        result = radiusSweep(model, inputs.x, inputs.mask, {
          block: run.block,
          radii: run.radii ?? defaultRadii(),
          lengths,
          lengthRadius: run.lengthRadius,
          ...(run.variants === undefined ? {} : { variants: run.variants }),
          constructed: run.constructed,
          truth: { denseLimit: run.denseLimit, maxIterations: run.iterations, seed: run.seed },
          onProgress: progress.onProgress,
        });
      } catch (e) {
        // e.g. an L2 variant asked of dot-product attention: one line naming the command
        if (e instanceof InputError && !e.message.startsWith("radius:"))
          throw new InputError(`radius: ${e.message}`);
        throw e;
      } finally {
        progress.end();
      }
      console.log(radiusTables(result));
      if (run.out === undefined) {
        console.log("(give --out DIR to write radius.json, radius.csv and radius.html)");
        return result;
      }
      const meta = {
        model: model.config,
        source,
        data: inputs.info.spec,
        split: inputs.info,
        seed: run.seed,
        denseLimit: run.denseLimit,
        maxIterations: run.iterations,
      };
      const [json, csv, html] = RADIUS_FILES.map((f) => join(run.out!, f));
      await writeJsonAtomically(json, radiusDocument(result, meta));
      await writeFileAtomically(csv, radiusCsv(result));
      await writeFileAtomically(html, await buildRadiusReport(result, source));
      console.log(`wrote ${json}, ${csv} and ${html}`);
      return result;
    } finally {
      inputs.dispose();
    }
  } finally {
    model.dispose();
  }
}

/** Tokens entering the blocks: patches + 1 for a ViT, the padded length for text. */
function tokenCount(config: { kind: string } & Record<string, unknown>, width: number): number {
  if (config.kind === "vit")
    return ((config.imageSize as number) / (config.patchSize as number)) ** 2 + 1;
  return width;
}
