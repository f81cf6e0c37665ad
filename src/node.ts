/**
 * attnlip's Node entry point (`import ... from "attnlip/node"`): what reads and writes files,
 * on top of the library in `attnlip` (src/index.ts): checkpoints in attnlip's format and
 * Hugging Face model folders, training runs, the analyze and attack commands as functions
 * (their files and held-out inputs included), safetensors files, and the HTML report.
 *
 * @example
 *   import { runAnalyze } from "attnlip/node";
 *   // a random vit-micro (no checkpoint) at 2 test digits of the embedded MNIST, nothing written
 *   const analysis = await runAnalyze({ model: "vit-micro", seed: 0, n: 2, backend: "wasm", mlp: "local",
 *     headTruth: false, blockTruth: true, iterations: 100, print: false });
 *   analysis.network.true; // the exact input-Jacobian norm at each digit
 */
export { loadCheckpoint, type LoadedCheckpoint, type TrainState } from "./train/checkpoint.ts";
export { loadHfModel, isHfFolder, type HfModel } from "./hf/load.ts";
export { train, type TrainResult } from "./train/trainer.ts";
export type { TrainOptions } from "./train/setup.ts";
export type { EvaluationSplit } from "./data/heldOut.ts";
export { runAnalyze, type AnalyzeRun, type AnalyzeResult } from "./pipelines/analyzeRun.ts";
export { runRadius, type RadiusRun } from "./pipelines/radiusRun.ts";
export { buildRadiusReport } from "./report/radius.ts";
export { runAttack, type AttackRun, type AttackRecord } from "./pipelines/attackRun.ts";
export { readSafetensors, writeSafetensors } from "./io/safetensorsFile.ts";
export { writeAnalysis } from "./analysis/files.ts";
export { analysisTables } from "./analysis/table.ts";
export { buildReport, writeReport, type ReportRun, type ReportOptions } from "./report/report.ts";
export { loadRun, type RunData } from "./report/load.ts";
