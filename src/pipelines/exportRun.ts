import { existsSync, realpathSync, statSync } from "node:fs";
import { resolve } from "node:path";
import { useBackend } from "../backend.ts";
import { isHfFolder, loadHfModel } from "../hf/load.ts";
import { hfExportOf, readTokenizerDocument, writeHfFolder } from "../hf/export.ts";
import { isCheckpointFolder, loadCheckpoint } from "../train/checkpoint.ts";
import { InputError } from "../util/errors.ts";

/**
 * Exports `source` (a checkpoint or a Hugging Face folder) to `out` as a Hugging Face folder.
 *
 * @returns the files written and the architecture.
 * @throws InputError when source is neither, out is source itself, or the model has no
 *   Hugging Face architecture; CheckpointError / HfImportError on a broken source.
 * @example await exportModel("runs/bert-ft", "runs/bert-ft-hf", false)
 */
export async function exportModel(source: string, out: string, force: boolean): Promise<{ written: string[]; architecture: string }> {
  const who = "export";
  await useBackend("cpu"); // the weights only pass through tensors: no computation
  if (!existsSync(source) || !statSync(source).isDirectory()) throw new InputError(`${who}: ${source} is not a folder`);
  if (resolve(source) === resolve(out) || (existsSync(out) && realpathSync(out) === realpathSync(source)))
    throw new InputError(`${who}: --out: ${out} is the source folder; write the export elsewhere`);
  if (await isHfFolder(source)) {
    const hf = await loadHfModel(source, who);
    try {
      const exported = hfExportOf(
        { config: hf.config, weights: hf.model.getWeights(), hfConfig: hf.hfConfig, tokenizer: await readTokenizerDocument(source, who) },
        who,
      );
      return { written: await writeHfFolder(out, exported, who, { replace: force }), architecture: exported.architecture.name };
    } finally {
      hf.model.dispose();
    }
  }
  if (!isCheckpointFolder(source)) throw new InputError(`${who}: ${source} holds neither a training checkpoint nor a Hugging Face model (config.json)`);
  const ckpt = await loadCheckpoint(source);
  try {
    const exported = hfExportOf(
      {
        config: ckpt.config,
        weights: ckpt.model.getWeights(),
        hfConfig: ckpt.hfConfig,
        tokenizer: ckpt.tokenizer?.toJSON() ?? null,
        labels: ckpt.trainState.data.labels,
      },
      who,
    );
    return { written: await writeHfFolder(out, exported, who, { replace: force }), architecture: exported.architecture.name };
  } finally {
    ckpt.model.dispose();
  }
}
