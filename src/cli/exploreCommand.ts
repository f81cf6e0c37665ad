import { Command } from "commander";
import { InputError } from "../util/errors.ts";
import { parseNumberFlag } from "../util/numberFlag.ts";
import { argumentWithDefault, optionWithDefault } from "./flags.ts";

interface ExploreFlags {
  port?: string;
  host?: string;
  out?: string;
  force?: boolean;
  digits?: string;
}

/**
 * `attnlip explore [CHECKPOINT]`: the explorer page (src/explorer/) for a ViT (the bundled
 * vit-micro by default) or a text model, served on localhost until Ctrl-C, or written as a
 * static folder with --out DIR.
 */
export function exploreCommand(): Command {
  return new Command("explore")
    .description(
      "an explorer page in the browser: an attention-row playground (sigma and its bounds), a digit to draw or pick (a text to type or pick, for a text model) with its prediction, attention maps, every bound beside the true value, and FGSM/PGD as eps grows; heavy work runs in a web worker",
    )
    .addArgument(
      argumentWithDefault(
        "[checkpoint]",
        "an attnlip ViT or text checkpoint, a Hugging Face ViT folder reading 28x28 grey images, or a Hugging Face BERT / GPT-2 folder with its tokenizer.json",
        "the bundled vit-micro trained on MNIST",
      ),
    )
    .addOption(optionWithDefault("--port <n>", "port on localhost; 0 = any free port", "8377"))
    .addOption(
      optionWithDefault("--host <name>", "interface to listen on", "127.0.0.1: this machine only"),
    )
    .option(
      "--out <dir>",
      "write the page as a static folder (any web server serves it) instead of serving it",
    )
    .option("--force", "with --out: replace an earlier explorer in the folder")
    .addOption(
      optionWithDefault(
        "--digits <n>",
        "held-out test digits (texts, for a text model) offered on the page",
        "12",
      ),
    )
    .action(async (checkpoint: string | undefined, flags: ExploreFlags) => {
      const port = parseNumberFlag(
        flags.port ?? "8377",
        "--port",
        { integer: true, min: 0, max: 65535 },
        "explore",
      );
      const digits = parseNumberFlag(
        flags.digits ?? "12",
        "--digits",
        { integer: true, min: 1, max: 100 },
        "explore",
      );
      const host = flags.host ?? "127.0.0.1";
      if (host.trim() === "")
        throw new InputError("explore: --host: give an interface name or address, e.g. 127.0.0.1");
      if (flags.force && flags.out === undefined)
        throw new InputError("explore: --force only applies with --out DIR");
      const { explorerFiles, serveExplorer, writeExplorer } = await import("../pipelines/exploreRun.ts");
      if (flags.out !== undefined) {
        if (flags.out.trim() === "")
          throw new InputError("explore: --out: give a folder, e.g. --out explorer");
        const files = await explorerFiles(checkpoint, digits);
        await writeExplorer(files, flags.out, flags.force === true);
        console.log(
          `wrote ${flags.out}/ (${files.size} files: the explorer as a static site; serve the folder, e.g. python3 -m http.server -d ${flags.out})`,
        );
        return;
      }
      // Reading the model and its held-out inputs and bundling the page take a few seconds.
      console.log("explore: reading the model and bundling the page...");
      const files = await explorerFiles(checkpoint, digits);
      const { url, close } = await serveExplorer(files, host, port);
      console.log(`attnlip explorer at ${url} (Ctrl-C to stop)`);
      await new Promise<void>((resolve) => {
        const stop = () => void close().then(resolve);
        process.once("SIGINT", stop);
        process.once("SIGTERM", stop);
      });
    });
}
