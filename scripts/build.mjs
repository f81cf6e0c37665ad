// `npm run build`: compiles src/ to dist/ (ESM JavaScript, .d.ts declarations and source maps)
// with tsc (tsconfig.build.json rewrites the sources' ".ts" imports to ".js"), and copies the
// worker threads' entry (src/parallel/worker.mjs, plain JavaScript) beside the compiled
// handlers, and bundles tfjs-core's gradients (dist/tfjs-gradients.mjs). The package's tarball (`npm pack`, `npm publish`) runs this first (prepack), so
// what users install is compiled code that needs no tsx. A checkout runs the sources instead
// (bin/attnlip.js).
import { copyFileSync, rmSync, writeFileSync } from "node:fs";
import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";

const out = process.argv[2] ?? "dist";
rmSync(out, { recursive: true, force: true }); // no stale file of a removed source survives
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
const result = spawnSync(process.execPath, [tsc, "-p", "tsconfig.build.json", "--outDir", out], {
  stdio: "inherit",
});
if (result.status !== 0) process.exit(result.status ?? 1);
copyFileSync("src/parallel/worker.mjs", `${out}/parallel/worker.mjs`);
// tfjs-core's gradients as one module, prebuilt (lib/tfjsGradients.node.mjs loads it).
const { gradientsBundle } = await import("../lib/tfjsGradientsBundle.mjs");
writeFileSync(`${out}/tfjs-gradients.mjs`, gradientsBundle());
console.error(`built ${out}/`); // stderr: `npm pack --json` prints the tarball's listing on stdout
