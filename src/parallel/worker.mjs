// The entry point of every attnlip worker thread (src/parallel/pool.ts). Worker threads do not
// inherit the tsx loader that bin/attnlip.js registers in the main thread, so each registers
// it again before loading the TypeScript task handlers.
import { register } from "tsx/esm/api";

register();
const { runTask } = await import("./handlers.ts");

export default runTask;
