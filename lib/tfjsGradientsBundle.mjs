// The bundle of tfjs-core's gradient registrations that attnlip loads in Node (see
// tfjsGradients.node.mjs for why). Shared by the checkout's first use and `npm run build`.
import { buildSync } from "esbuild";
import { fileURLToPath } from "node:url";

/**
 * tfjs-core's register_all_gradients bundled into one ES module (esbuild; minified, about
 * 140 kB): the gradients with a copy of the tfjs-core functions they call.
 *
 * @returns the module's source text.
 * @throws Error from esbuild when tfjs-core cannot be resolved.
 */
export function gradientsBundle() {
  return buildSync({
    stdin: {
      contents: 'import "@tensorflow/tfjs-core/dist/register_all_gradients";',
      resolveDir: fileURLToPath(new URL(".", import.meta.url)),
    },
    bundle: true,
    platform: "node",
    format: "esm",
    minify: true,
    write: false,
    logLevel: "silent",
  }).outputFiles[0].text;
}
