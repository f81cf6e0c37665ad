import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseSpec, type DataTask } from "../data/registry.ts";
import "../data/sources/index.ts";
import { isHfFolder } from "../hf/load.ts";
import { modelPreset, PRESET_NAMES } from "../nn/config.ts";
import { InputError } from "../util/errors.ts";
import { per255Advice } from "../util/per255.ts";
import type { StudyGrid } from "./grid.ts";

/**
 * What a study's grid can be checked for before anything is saved or trained, so that a
 * mistyped model or data spec is refused at once instead of after hours of other runs (or,
 * once the grid is saved, in a folder that could not be continued): every data spec names a
 * registered source and an existing file or folder, every model is a preset or a Hugging Face
 * folder of the data's kind, and the attack radii fit the images' pixel range.
 */

/** The image shapes of the embedded or well-known image sources (for the l_2 diameter). */
const IMAGE_SHAPES: Record<string, [number, number, number]> = { mnist: [28, 28, 1], cifar10: [32, 32, 3] };

/** The data kind a model reads: "image" for a ViT, "text" for a text model. */
async function modelTask(model: string): Promise<DataTask> {
  if (PRESET_NAMES.includes(model as never)) return modelPreset(model).kind === "vit" ? "image" : "text";
  if (existsSync(model) && (await isHfFolder(model))) {
    const config = JSON.parse(readFileSync(join(model, "config.json"), "utf8")) as { model_type?: unknown };
    return config.model_type === "vit" ? "image" : "text";
  }
  throw new InputError(
    `study: --model: "${model}" is neither a model preset (${PRESET_NAMES.join(", ")}) nor a Hugging Face folder with a config.json`,
  );
}

/**
 * Checks a grid before any run starts.
 *
 * @throws InputError naming the flag and the value: an unknown data spec or a missing file or
 *   folder, an unknown model, a model of the other kind than its data (a ViT on text), an l_inf
 *   radius above 1 (the width of the pixel range [0, 1]) or an l_2 radius above the images'
 *   diameter for image data, augmentation on text data or shifts as large as the images, more
 *   attacked or analysed inputs than train.testLimit keeps.
 * @example await preflightGrid(parseStudyGrid({ model: ["vit-micro"] }, "study")) // resolves
 */
export async function preflightGrid(grid: StudyGrid): Promise<void> {
  const tasks = new Map<string, DataTask>();
  for (const data of grid.data) {
    let parsed: ReturnType<typeof parseSpec>;
    try {
      parsed = parseSpec(data);
    } catch (e) {
      throw new InputError(`study: --data: ${(e as Error).message.replace(/^data: /, "")}`);
    }
    if (parsed.arg !== null && !existsSync(parsed.arg)) throw new InputError(`study: --data: "${data}": ${parsed.arg} does not exist`);
    tasks.set(data, parsed.source.task);
  }
  for (const model of grid.model) {
    const kind = await modelTask(model);
    const other = grid.data.find((d) => tasks.get(d) !== kind);
    if (other !== undefined)
      throw new InputError(`study: --model ${model} reads ${kind} data, but --data ${other} is ${tasks.get(other)} data: every model of the grid runs on every data spec`);
  }
  for (const data of grid.data) {
    if (tasks.get(data) !== "image") {
      if (grid.train.augmentShift > 0)
        throw new InputError(`study: --augment-shift: shifts images, but --data ${data} is ${tasks.get(data)} data`);
      continue;
    }
    const badLinf = (grid.attack.linf ?? []).find((e) => e > 1);
    if (badLinf !== undefined) {
      const advice = per255Advice(badLinf, 1);
      throw new InputError(`study: --eps-linf: ${badLinf} is out of range (at most 1, the width of the pixel range [0, 1] of ${data}${advice !== null ? `; ${advice}` : ""})`);
    }
    const shape = IMAGE_SHAPES[parseSpec(data).source.name];
    if (shape !== undefined) {
      if (grid.train.augmentShift >= Math.min(shape[0], shape[1]))
        throw new InputError(`study: --augment-shift: ${grid.train.augmentShift} pixels moves every ${shape[0]}x${shape[1]} image of ${data} out of its frame (give less than ${Math.min(shape[0], shape[1])})`);
      const diameter = Math.sqrt(shape[0] * shape[1] * shape[2]);
      const badL2 = (grid.attack.l2 ?? []).find((e) => e > diameter);
      if (badL2 !== undefined)
        throw new InputError(`study: --eps-l2: ${badL2} is out of range (at most ${Number(diameter.toFixed(2))}, the l_2 diameter of ${shape.join("x")} images in [0, 1] of ${data})`);
    }
  }
  const limit = grid.train.testLimit;
  if (limit !== null) {
    if (grid.attack.n > limit) throw new InputError(`study: --attack-n ${grid.attack.n} is more than --test-limit ${limit} (the test examples kept)`);
    if (grid.analyze.n > limit) throw new InputError(`study: --analyze-n ${grid.analyze.n} is more than --test-limit ${limit} (the test examples kept)`);
  }
}
