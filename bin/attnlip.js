#!/usr/bin/env node
// Entry point of the `attnlip` command. Loads the TypeScript sources through tsx, so the
// package runs from a clean clone after `npm ci` with no build step.
import { register } from "tsx/esm/api";

register();
await import("../src/cli/main.ts");
