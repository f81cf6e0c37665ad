import { readdirSync } from "node:fs";
import { basename } from "node:path";
import { Command } from "commander";
import { HF_ARCHITECTURES } from "../hf/architectures.ts";
import { InputError } from "../util/errors.ts";
import { optionWithDefault } from "./flags.ts";

interface ExportFlags {
  format?: string;
  out?: string;
  force?: boolean;
}

/**
 * `attnlip export SRC --format hf --out DIR`: writes a model as a Hugging Face folder that
 * transformers loads (src/hf/export.ts). SRC is a training checkpoint (a fine-tuned imported
 * model, or an attnlip ViT) or a Hugging Face folder (a round trip).
 */
export function exportCommand(): Command {
  return new Command("export")
    .description("write a checkpoint (a fine-tuned Hugging Face model, or an attnlip ViT) as a Hugging Face folder: config.json, model.safetensors, tokenizer.json")
    .argument("[source]", "a training checkpoint folder, or a Hugging Face folder")
    .addOption(optionWithDefault("--format <name>", "the output format; only hf (transformers' save_pretrained layout)", "hf"))
    .option("--out <dir>", "the folder to write (required)")
    .option("--force", "replace the files of an earlier export in --out")
    .action(async (source: string | undefined, flags: ExportFlags) => {
      if (source === undefined)
        throw new InputError("export: give the checkpoint to export and --out DIR, e.g. attnlip export runs/bert-ft --format hf --out runs/bert-ft-hf");
      if (flags.format !== undefined && flags.format.trim() !== "hf")
        throw new InputError(`export: --format: "${flags.format}" is not a format attnlip writes; it writes hf (Hugging Face transformers)`);
      if (flags.out === undefined || flags.out.trim() === "")
        throw new InputError(`export: --out DIR: the folder to write, e.g. attnlip export ${source} --format hf --out ${source.replace(/\/+$/, "")}-hf`);
      const { exportModel } = await import("../pipelines/exportRun.ts");
      const { written, architecture } = await exportModel(source, flags.out, flags.force === true);
      console.log(`wrote ${flags.out} (Hugging Face ${architecture}: ${written.map((p) => p.split("/").pop()).join(", ")})`);
      // Files of an earlier model in --out stay; transformers may read some (vocab.txt, tokenizer_config.json).
      const names = new Set(written.map((p) => basename(p)));
      const others = readdirSync(flags.out).filter((f) => !names.has(f));
      if (others.length > 0)
        console.error(`export: warning: ${flags.out} also holds ${others.slice(0, 5).join(", ")}${others.length > 5 ? ` and ${others.length - 5} more` : ""}, not written by this export; remove them if they belong to another model`);
      if (HF_ARCHITECTURES.get(architecture)?.addsHead)
        console.log(`  the linear head attnlip added is not part of ${architecture} and is not written`);
    });
}
