// Registers tfjs-core's gradients in Node (package.json maps "#tfjs-gradients" here; browsers get
// tfjsGradients.browser.mjs). tfjs-core registers no gradient by itself, and its gradient modules
// (ES modules with extensionless imports in a CommonJS package) do not load under Node. The union
// package @tensorflow/tfjs registers them, but it also loads tfjs-layers, -converter, -data and the
// WebGL backend, none of which attnlip uses: about 0.4 s of CPU in every process and every worker
// thread. So this loads one esbuild bundle of the gradient registrations instead: prebuilt in the
// package (dist/, by `npm run build`), built once per tfjs-core version into
// node_modules/.cache/attnlip/ in a checkout, and the union package if neither can be had.
// The bundle carries its own copy of the tfjs-core functions the gradients call; tfjs keeps its
// engine and its kernel and gradient registries on the global object, so the copy registers into
// and runs on the same engine as attnlip's tfjs-core (test/nn/gradients.test.ts checks the
// gradients against the union package's).
import { existsSync, mkdirSync, renameSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";

const prebuilt = new URL("../dist/tfjs-gradients.mjs", import.meta.url);
// A checkout (src/ beside lib/) never reads dist/: a dist/ built earlier may be stale, and npm pack
// rebuilds it while other processes start.
const checkout = existsSync(new URL("../src/", import.meta.url));

async function load() {
  // The union package on request: test/nn/gradients.test.ts compares the two.
  if (process.env.ATTNLIP_TFJS_GRADIENTS === "union") return import("@tensorflow/tfjs");
  if (!checkout && existsSync(prebuilt)) return import(prebuilt.href);
  try {
    const require = createRequire(import.meta.url);
    const version = require("@tensorflow/tfjs-core/package.json").version;
    const dir = fileURLToPath(new URL("../node_modules/.cache/attnlip/", import.meta.url));
    const file = `${dir}tfjs-gradients-${version}.mjs`;
    if (!existsSync(file)) {
      const { gradientsBundle } = await import("./tfjsGradientsBundle.mjs");
      mkdirSync(dir, { recursive: true });
      const temporary = `${file}.${process.pid}.tmp`;
      writeFileSync(temporary, gradientsBundle());
      renameSync(temporary, file); // atomic: a concurrent process sees the whole file or none
    }
    return import(pathToFileURL(file).href);
  } catch {
    return import("@tensorflow/tfjs"); // registers the same gradients, only slower to load
  }
}

await load();
