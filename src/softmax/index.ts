export { sigma, sigmaFromRow, sigmaEigenvector, sigmaGradient } from "./sigma.ts";
export { sigmaTop2, sigmaQuad } from "./closedForm.ts";
export { referenceBounds, type ReferenceBounds } from "./referenceBounds.ts";
export { sigmaRows, type RowNorm, type SigmaRowsOptions } from "./rows.ts";
export { rowStats, type RowStats } from "./rowStats.ts";
export { sigmaTensor, sigmaTop2Tensor, sigmaQuadTensor } from "./tensor.ts";
export { parseProbabilityRow, softmaxRow, parseNumber, parseNumberList } from "./parse.ts";
export { InputError } from "../util/errors.ts";
export { rowReport, ROW_BOUNDS, type RowReport } from "./rowReport.ts";
