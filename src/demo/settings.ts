/**
 * The settings of `attnlip demo`: the full run (the main job, `npm start`, about 8 minutes on
 * 2 cores) and the quick run (tests, well under a minute). Kept in one place so the README's
 * description and the code cannot drift apart.
 */
export interface DemoSettings {
  /** Model preset or config. */
  model: string | Record<string, unknown>;
  /** Training digits (of the embedded 8,000-digit training split) and epochs. */
  trainSize: number;
  epochs: number;
  batch: number;
  lr: number;
  /** JaSMin weight of the second run (the first has 0). */
  jasmin: number;
  /** Test digits analysed (bounds, true values) and attacked. */
  analyzeN: number;
  attackN: number;
  /** PGD and FGSM radii (l_inf, pixel units in [0, 1]) and PGD steps. */
  eps: number[];
  steps: number;
  /** Power-iteration limit for the block true values. */
  iterations: number;
}

export const FULL_DEMO: DemoSettings = {
  model: "vit-tiny",
  trainSize: 4000,
  epochs: 2,
  batch: 32,
  lr: 2e-3,
  jasmin: 0.1,
  analyzeN: 12,
  attackN: 80,
  eps: [0, 0.005, 0.01, 0.02],
  steps: 10,
  iterations: 50,
};

export const QUICK_DEMO: DemoSettings = {
  model: {
    kind: "vit",
    imageSize: 28,
    channels: 1,
    patchSize: 7,
    dModel: 16,
    heads: 2,
    blocks: 1,
    mlpHidden: 32,
    classes: 10,
  },
  trainSize: 256,
  epochs: 1,
  batch: 32,
  lr: 3e-3,
  jasmin: 0.5,
  analyzeN: 2,
  attackN: 16,
  eps: [0, 0.01],
  steps: 3,
  iterations: 20,
};
