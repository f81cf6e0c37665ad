// The entry point of every attnlip worker thread (src/parallel/pool.ts). In the built package
// (dist/, `npm run build`) it sits beside the compiled task handlers and loads them. In a
// checkout it sits beside the TypeScript sources: worker threads do not inherit the tsx loader
// that bin/attnlip.js registers in the main thread, so it registers it again first.
import { existsSync } from "node:fs";

const compiled = new URL("./handlers.js", import.meta.url);
let handlers;
if (existsSync(compiled)) handlers = await import(compiled.href);
else {
  const { register } = await import("tsx/esm/api");
  register();
  handlers = await import("./handlers.ts");
}

export default handlers.runTask;
