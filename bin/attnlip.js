#!/usr/bin/env node
// Entry point of the `attnlip` command. In a checkout (src/ beside bin/) it loads the
// TypeScript sources through tsx, so the command runs after `npm ci` with no build step and
// always runs the code as it is now; the installed package has no src/ and runs the compiled
// dist/ (`npm run build`), with no tsx.
import { existsSync } from "node:fs";

const source = new URL("../src/cli/main.ts", import.meta.url);
if (existsSync(source)) {
  const { register } = await import("tsx/esm/api");
  register();
  await import(source.href);
} else await import(new URL("../dist/cli/main.js", import.meta.url).href);
