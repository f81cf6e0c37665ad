// The npm package works for a project that installs it: `npm pack` (which builds dist/ first)
// gives a tarball of compiled JavaScript with type declarations and no TypeScript sources; in a
// fresh project that has it in node_modules (and attnlip's dependencies, but not tsx or
// typescript), `import ... from "attnlip"`, "attnlip/softmax" and "attnlip/node" load, a file
// outside the exports map is refused, the installed bin runs (worker threads included), and a
// TypeScript consumer type-checks against the declarations.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { HANG_MS } from "../helpers/patience.ts";

const root = fileURLToPath(new URL("../..", import.meta.url));
const version = (
  JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string }
).version;

const idleKill = fileURLToPath(new URL("../helpers/idleKill.mjs", import.meta.url));

/**
 * Runs node in `cwd`, returning its exit code and output (stdout, then stderr). No fixed time
 * limit (test/helpers/patience.ts): killed only after printing nothing for HANG_MS, and then
 * stderr names the command.
 */
function node(args: string[], cwd: string) {
  const label = `"node ${args.join(" ")}" (in ${cwd})`;
  const idle = String(HANG_MS);
  const r = spawnSync(process.execPath, [idleKill, idle, label, process.execPath, ...args], {
    cwd,
    encoding: "utf8",
    env: { ...process.env, ATTNLIP_WORKERS: "1" },
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

test(
  "npm pack gives a compiled package that another project imports, runs and type-checks",
  () => {
    const dir = mkdtempSync(join(tmpdir(), "attnlip-package-"));
    try {
      // npm pack runs prepack (scripts/build.mjs) first.
      const packed = JSON.parse(
        execFileSync("npm", ["pack", "--json", "--pack-destination", dir], {
          cwd: root,
          timeout: HANG_MS, // catches a hang, not slowness (npm pack prints nothing until done)
          encoding: "utf8",
          stdio: ["ignore", "pipe", "pipe"],
        }),
      ) as { filename: string; files: { path: string }[] }[];
      const files = packed[0].files.map((f) => f.path);
      for (const needed of [
        "dist/index.js",
        "dist/index.d.ts",
        "dist/node.js",
        "dist/node.d.ts",
        "dist/softmax/index.js",
        "dist/cli/main.js",
        "dist/parallel/worker.mjs",
        "bin/attnlip.js",
        "LICENSE",
        "README.md",
        "docs/math.md",
        "package.json",
      ])
        assert.ok(files.includes(needed), `the tarball lacks ${needed}`);
      const stray = files.filter(
        (f) =>
          f.startsWith("src/") ||
          f.startsWith("test/") ||
          (f.endsWith(".ts") && !f.endsWith(".d.ts")),
      );
      assert.deepEqual(stray, [], "no sources or tests in the tarball");

      // A project with the package installed, and attnlip's dependencies but not tsx or typescript.
      const project = join(dir, "project");
      const modules = join(project, "node_modules");
      mkdirSync(modules, { recursive: true });
      execFileSync("tar", ["-xzf", join(dir, packed[0].filename), "-C", modules]);
      renameSync(join(modules, "package"), join(modules, "attnlip"));
      for (const name of readdirSync(join(root, "node_modules")))
        if (!["tsx", "typescript", ".bin", "attnlip"].includes(name))
          symlinkSync(join(root, "node_modules", name), join(modules, name));
      writeFileSync(
        join(project, "package.json"),
        '{ "name": "consumer", "type": "module", "private": true }\n',
      );

      writeFileSync(
        join(project, "use.mjs"),
        `import { sigma, analyze, createModel } from "attnlip";
import { sigmaTop2 } from "attnlip/softmax";
import { loadCheckpoint, runAnalyze, buildReport } from "attnlip/node";
let deep = "loaded";
try { await import("attnlip/dist/backend.js"); } catch (e) { deep = e.code; }
console.log(JSON.stringify({ sigma: sigma([0.5, 0.3, 0.2]), top2: sigmaTop2([0.5, 0.3, 0.2]),
  functions: [analyze, createModel, loadCheckpoint, runAnalyze, buildReport].map((f) => typeof f), deep }));
`,
      );
      const used = node(["use.mjs"], project);
      assert.equal(used.code, 0, used.stderr);
      const out = JSON.parse(used.stdout) as {
        sigma: number;
        top2: number;
        functions: string[];
        deep: string;
      };
      assert.ok(Math.abs(out.sigma - 0.3881024967590665) < 1e-12, `sigma ${out.sigma}`);
      assert.equal(out.top2, 0.4);
      assert.deepEqual(out.functions, ["function", "function", "function", "function", "function"]);
      assert.equal(
        out.deep,
        "ERR_PACKAGE_PATH_NOT_EXPORTED",
        "only the exports map's entry points are public",
      );

      // The installed command runs the compiled code (no src/ beside its bin), worker threads too.
      const bin = join(modules, "attnlip", "bin", "attnlip.js");
      assert.equal(node([bin, "--version"], project).stdout, `${version}\n`);
      // `npx attnlip` in the project, as npm install links it (node_modules/.bin/attnlip).
      mkdirSync(join(modules, ".bin"));
      symlinkSync("../attnlip/bin/attnlip.js", join(modules, ".bin", "attnlip"));
      chmodSync(bin, 0o755);
      const npx = spawnSync("npx", ["--no-install", "attnlip", "sigma", "0.5,0.3,0.2", "--json"], {
        cwd: project,
        encoding: "utf8",
      });
      assert.equal(npx.status, 0, npx.stderr);
      const row = { stdout: npx.stdout };
      assert.equal((JSON.parse(row.stdout) as { sigmaTop2: number }).sigmaTop2, 0.4);
      const analysed = node(
        [
          bin,
          "analyze",
          "--model",
          "vit-micro",
          "--random-init",
          "--n",
          "8",
          "--workers",
          "2",
          "--no-head-truth",
          "--no-block-truth",
          "--out",
          "a",
        ],
        project,
      );
      assert.equal(analysed.code, 0, analysed.stderr);
      assert.match(analysed.stdout, /network \(exact input-Jacobian norm/);
      assert.equal(
        (
          JSON.parse(readFileSync(join(project, "a", "analysis.json"), "utf8")) as {
            layers: { network: { true: number[] } };
          }
        ).layers.network.true.length,
        8,
      );

      // README's five-line example, as README gives it.
      const example = /Five lines in that project[\s\S]*?```js\n([\s\S]*?)```/.exec(
        readFileSync(join(root, "README.md"), "utf8"),
      );
      assert.ok(example !== null, "README's library example was not found");
      writeFileSync(join(project, "example.mjs"), example[1]);
      const ran = node(["example.mjs"], project);
      assert.equal(ran.code, 0, ran.stderr);
      const [s, truth, fused] = ran.stdout.trim().split(/\s+/);
      assert.equal(Number(s), 0.38810249675906655, ran.stdout);
      assert.ok(Number(truth) > 0 && Number(fused) >= Number(truth), ran.stdout);

      // A TypeScript project type-checks against the declarations (resolved through the exports map).
      writeFileSync(
        join(project, "use.ts"),
        `import { sigma, type Analysis } from "attnlip";
import { sigmaQuad } from "attnlip/softmax";
import { runAnalyze, type AnalyzeRun } from "attnlip/node";
const s: number = sigma([0.5, 0.5]) + sigmaQuad([0.5, 0.5]);
const run: AnalyzeRun = { model: "vit-micro", seed: 0, n: 1, backend: "wasm", mlp: "local", headTruth: false, blockTruth: false, iterations: 10 };
export const pending: Promise<Analysis> = runAnalyze(run);
export { s };
// @ts-expect-error sigma takes an array of probabilities, not a string
sigma("0.5,0.5");
`,
      );
      const tsc = createRequire(join(root, "package.json")).resolve("typescript/bin/tsc");
      const checked = node(
        [
          tsc,
          "--noEmit",
          "--strict",
          "--skipLibCheck",
          "--module",
          "nodenext",
          "--moduleResolution",
          "nodenext",
          "--target",
          "es2022",
          "use.ts",
        ],
        project,
      );
      assert.equal(checked.code, 0, checked.stdout + checked.stderr);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
);
