import { existsSync } from "node:fs";
import { resolve as resolvePath } from "node:path";
import { build, type Plugin } from "esbuild";

/**
 * The explorer's scripts, bundled for the browser by esbuild: page.js (the page), charts.js
 * (Vega-Lite's renderer, which the page loads when it draws its first chart), worker.js (its
 * web worker, with tfjs and the maths) and webgl.js (tfjs's WebGL backend, which the worker loads
 * when a user picks it). Bundled when `attnlip explore` starts
 * (a second or two; once per process), from the TypeScript sources in a checkout and from the
 * compiled dist/ in the installed package.
 *
 * @returns the scripts' text by file name.
 * @throws Error from esbuild when a module cannot be resolved.
 * @example const { "page.js": page } = await bundleExplorer();
 */
export function bundleExplorer(): Promise<Record<ExplorerScript, string>> {
  bundled ??= bundle(); // the sources do not change while a process runs
  return bundled;
}

/** The explorer's scripts: the page's, its charts', its web worker's, and the WebGL backend the worker loads on demand. */
export type ExplorerScript = "page.js" | "charts.js" | "worker.js" | "webgl.js";

let bundled: Promise<Record<ExplorerScript, string>> | undefined;

async function bundle(): Promise<Record<ExplorerScript, string>> {
  const source = (name: string) => {
    const ts = new URL(`./${name}.ts`, import.meta.url);
    return existsSync(ts) ? ts : new URL(`./${name}.js`, import.meta.url);
  };
  const out = {} as Record<ExplorerScript, string>;
  const entries = [
    ["page", "page.js"],
    ["chartsEntry", "charts.js"],
    ["worker", "worker.js"],
    ["webglBackend", "webgl.js"],
  ] as const;
  for (const [name, file] of entries) {
    const result = await build({
      entryPoints: [decodeURIComponent(source(name).pathname)],
      bundle: true,
      platform: "browser",
      format: "iife",
      minify: true,
      // The worker needs tfjs-core, its gradients (package.json's "#tfjs-gradients", browser
      // condition) and the cpu backend; the wasm backend's import stays (backend.ts registers
      // it) but is never initialised here. webgl.js takes the worker's tfjs-core (set on the
      // worker's global before it loads webgl.js) instead of a copy of its own.
      plugins: name === "webglBackend" ? [workerTfjsCore] : [zodEnglishOnly],
      write: false,
      logLevel: "silent",
    });
    out[file] = result.outputFiles[0].text;
  }
  return out;
}

/**
 * zod's index of error-message translations (`z.locales`, about 50 languages) as English only:
 * attnlip words its own messages and never switches zod's language, and the translations were
 * 255 KB of the worker's 1.16 MB, parsed on every page load. zod itself still imports its
 * English messages directly.
 */
const zodEnglishOnly: Plugin = {
  name: "zod-english-only",
  setup(b) {
    b.onResolve({ filter: /\/locales\/index\.js$/ }, (args) =>
      /[\\/]node_modules[\\/]zod[\\/]/.test(args.importer)
        ? {
            path: "zod-locales",
            namespace: "zod-english-only",
            pluginData: resolvePath(args.resolveDir, "../locales"),
          }
        : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: "zod-english-only" }, (args) => ({
      contents: 'export { default as en } from "./en.js";',
      resolveDir: args.pluginData as string,
      loader: "js",
    }));
  },
};

/** Resolves "@tensorflow/tfjs-core" to the worker's own (self.attnlipTfjsCore, worker.ts). */
const workerTfjsCore: Plugin = {
  name: "worker-tfjs-core",
  setup(b) {
    b.onResolve({ filter: /^@tensorflow\/tfjs-core$/ }, () => ({
      path: "tfjs-core",
      namespace: "worker-global",
    }));
    b.onLoad({ filter: /.*/, namespace: "worker-global" }, () => ({
      contents: "module.exports = self.attnlipTfjsCore;",
      loader: "js",
    }));
  },
};
