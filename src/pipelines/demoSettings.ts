/**
 * The settings of `attnlip demo`: the full run (the main job, `npm start`, about 8 minutes on
 * 2 cores) and the quick run (tests, well under a minute). Kept in one place so the README's
 * description and the code cannot drift apart.
 */
export interface DemoSettings {
  /** What the models read: images (embedded MNIST) or text (the SpamAssassin corpus). */
  task: "image" | "text";
  /** Data spec for train, analyze and attack. */
  data: string;
  /** Threat model of the attacks: l_inf in pixel space for images, l_2 in embedding space for text. */
  norm: "linf" | "l2";
  /** Model preset or config. */
  model: string | Record<string, unknown>;
  /** Training examples (the first ones of the training split) and epochs. */
  trainSize: number;
  epochs: number;
  batch: number;
  lr: number;
  /** JaSMin weight of the second run (the first has 0). */
  jasmin: number;
  /** Test examples analysed (bounds, true values) and attacked. */
  analyzeN: number;
  attackN: number;
  /** PGD and FGSM radii (input units: pixels in [0, 1], or embedding units) and PGD steps. */
  eps: number[];
  steps: number;
  /** Power-iteration limit for the block true values. */
  iterations: number;
}

export const FULL_DEMO: DemoSettings = {
  task: "image",
  data: "mnist",
  norm: "linf",
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
  task: "image",
  data: "mnist",
  norm: "linf",
  model: "vit-micro",
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

/** `attnlip demo --task text`: text-tiny on the SpamAssassin corpus, l_2 attacks on token embeddings. */
export const FULL_TEXT_DEMO: DemoSettings = {
  task: "text",
  data: "spam",
  norm: "l2",
  model: "text-tiny",
  trainSize: 3000,
  epochs: 1,
  batch: 32,
  lr: 1e-3,
  jasmin: 0.1,
  analyzeN: 8,
  attackN: 64,
  eps: [0, 0.05, 0.1, 0.25],
  steps: 5,
  iterations: 40,
};

export const QUICK_TEXT_DEMO: DemoSettings = {
  task: "text",
  data: "spam",
  norm: "l2",
  model: "text-micro",
  trainSize: 256,
  epochs: 1,
  batch: 32,
  lr: 3e-3,
  jasmin: 0.5,
  analyzeN: 2,
  attackN: 16,
  eps: [0, 0.25],
  steps: 3,
  iterations: 20,
};

/** The settings for a task and size. */
export function demoSettings(task: "image" | "text", quick: boolean): DemoSettings {
  if (task === "text") return quick ? QUICK_TEXT_DEMO : FULL_TEXT_DEMO;
  return quick ? QUICK_DEMO : FULL_DEMO;
}
