import { tf } from "../backend.ts";
import type { Model } from "../nn/create.ts";
import type { ModelBatch } from "./kinds/registry.ts";
import type { AdamW } from "./optimizer.ts";
import { trainStep, type JasminSettings, type StepMetrics } from "./step.ts";

/**
 * Who computes the optimizer steps of a run: this thread ({@link localStepper}, the default)
 * or worker threads (parallel/trainTask.ts, data-parallel). The epoch loop (epoch.ts) knows
 * only this interface.
 */

/** The settings of one step. */
export interface StepSettings {
  /** Learning rate of this step (the schedule's). */
  lr: number;
  /** Global gradient-norm clip (0: off). */
  clip: number;
  jasmin: JasminSettings;
}

/** Runs the optimizer steps of one training run on its model and optimizer. */
export interface Stepper {
  /** Worker threads computing gradients (1: this thread). */
  readonly workers: number;
  /**
   * One optimizer step on a batch: the run's model and optimizer are updated when the step's
   * loss and gradient norm are finite.
   *
   * @throws errors of the model on malformed inputs.
   */
  step(batch: ModelBatch, settings: StepSettings): Promise<StepMetrics>;
  /** Frees what the stepper holds (workers); the model and optimizer stay the run's. */
  close(): Promise<void>;
}

/** Makes the stepper of a run (called once the run is built; state.batchSize bounds how many slices a step has). */
export type StepperFactory = (run: {
  model: Model;
  optimizer: AdamW;
  state: { batchSize: number };
}) => Promise<Stepper>;

/**
 * Steps in this thread: {@link trainStep} on each batch.
 *
 * @example const stepper = await localStepper(run); await stepper.step(batch, { lr, clip, jasmin });
 */
export const localStepper: StepperFactory = async ({ model, optimizer }) => ({
  workers: 1,
  async step(batch, settings) {
    // A macrotask turn before each step: trainStep is synchronous, so without it an epoch in
    // this thread never lets the event loop run Ctrl-C's handler until the epoch ends.
    await new Promise<void>((resolve) => setImmediate(resolve));
    return tf.tidy(() => {
      const y = tf.tensor1d(batch.labels, "int32");
      const { x, mask } = batch.inputs();
      return trainStep(model, optimizer, x, y, { ...settings, mask });
    });
  },
  async close() {},
});
