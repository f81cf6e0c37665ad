import { writeJsonAtomically } from "../src/io/atomicWrite.ts";
import { benchSoftmax } from "./softmax.bench.ts";
import { benchLipschitz } from "./lipschitz.bench.ts";
import { benchTrain } from "./train.bench.ts";
import { benchParallel } from "./parallel.bench.ts";
import { benchHf } from "./hf.bench.ts";
import { benchTokenizers } from "./tokenizers.bench.ts";
import { benchExplorer } from "./explorer.bench.ts";
import { benchStartup } from "./startup.bench.ts";
import { benchScale } from "./scale.bench.ts";

/**
 * `npm run bench [-- suite ...]`: runs each benchmark suite, prints its tables (ratios
 * against references measured in the same run) and writes bench/results/<suite>.json.
 */
const suites: Record<string, () => Promise<Record<string, unknown>>> = {
  softmax: benchSoftmax,
  lipschitz: benchLipschitz,
  train: benchTrain,
  parallel: benchParallel,
  hf: benchHf,
  tokenizers: benchTokenizers,
  explorer: benchExplorer,
  startup: benchStartup,
  scale: benchScale,
};

const wanted = process.argv.slice(2);
const unknown = wanted.filter((w) => !(w in suites));
if (unknown.length > 0) {
  console.error(`bench: unknown suite(s) ${unknown.join(", ")}; known: ${Object.keys(suites).join(", ")}`);
  process.exit(2);
}
for (const [name, run] of Object.entries(suites)) {
  if (wanted.length > 0 && !wanted.includes(name)) continue;
  console.log(`\n## ${name}`);
  const started = new Date().toISOString();
  const result = await run();
  const path = new URL(`./results/${name}.json`, import.meta.url).pathname;
  await writeJsonAtomically(path, { suite: name, started, node: process.version, ...result });
  console.log(`wrote ${path}`);
}
