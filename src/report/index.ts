export { buildReport, writeReport, type ReportRun, type ReportOptions } from "./report.ts";
export {
  loadRun,
  type RunData,
  type AnalysisFile,
  type AttackFile,
  type MetricRecord,
} from "./load.ts";
export { renderVegaLite, inlineSvg } from "./render.ts";
export { sigmaUpperEnvelope, sigmaLowerEnvelope, envelopePoints } from "./envelope.ts";
