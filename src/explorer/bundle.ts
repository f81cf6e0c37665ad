import { existsSync } from "node:fs";
import { build } from "esbuild";

/**
 * The explorer's two scripts, bundled for the browser by esbuild: page.js (the page) and
 * worker.js (its web worker, with tfjs and the maths). Bundled when `attnlip explore` starts
 * (a second or two; once per process), from the TypeScript sources in a checkout and from the
 * compiled dist/ in the installed package.
 *
 * @returns the scripts' text by file name.
 * @throws Error from esbuild when a module cannot be resolved.
 * @example const { "page.js": page } = await bundleExplorer();
 */
export function bundleExplorer(): Promise<Record<"page.js" | "worker.js", string>> {
  bundled ??= bundle(); // the sources do not change while a process runs
  return bundled;
}

let bundled: Promise<Record<"page.js" | "worker.js", string>> | undefined;

async function bundle(): Promise<Record<"page.js" | "worker.js", string>> {
  const source = (name: string) => {
    const ts = new URL(`./${name}.ts`, import.meta.url);
    return existsSync(ts) ? ts : new URL(`./${name}.js`, import.meta.url);
  };
  const out = {} as Record<"page.js" | "worker.js", string>;
  for (const name of ["page", "worker"] as const) {
    const result = await build({
      entryPoints: [decodeURIComponent(source(name).pathname)],
      bundle: true,
      platform: "browser",
      format: "iife",
      minify: true,
      // The worker needs tfjs-core, its gradients (package.json's "#tfjs-gradients", browser
      // condition) and the cpu backend; the wasm backend's import stays (backend.ts registers
      // it) but is never initialised here.
      write: false,
      logLevel: "silent",
    });
    out[`${name}.js`] = result.outputFiles[0].text;
  }
  return out;
}
