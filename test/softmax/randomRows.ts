import { gaussian, mulberry32 } from "../helpers/random.ts";
import { softmaxRow } from "../../src/softmax/index.ts";

/**
 * Random softmax rows for the property tests: n log-uniform in [1, 200] (the dense
 * eigensolver is O(n^3)), temperatures log-uniform in [0.05, 50], a third of the rows with
 * masked zeros and a fifth with exact ties at the top.
 */
export function* randomSoftmaxRows(count: number, seed: number): Generator<Float64Array> {
  const rand = mulberry32(seed);
  for (let k = 0; k < count; k++) {
    const n = Math.max(1, Math.min(200, Math.round(Math.exp(rand() * Math.log(200)))));
    const temperature = Math.exp(Math.log(0.05) + rand() * Math.log(1000));
    const logits = Array.from({ length: n }, () => gaussian(rand) / temperature);
    if (n >= 3 && rand() < 0.2) {
      // exact tie at the top: copy the maximum logit to another position
      const top = logits.indexOf(Math.max(...logits));
      logits[(top + 1 + Math.floor(rand() * (n - 1))) % n] = logits[top];
    }
    const p = softmaxRow(logits);
    if (n >= 3 && rand() < 1 / 3) {
      let kept = 0;
      for (let i = 0; i < n; i++) {
        if (rand() < 0.3) p[i] = 0;
        else kept += p[i];
      }
      if (kept > 0) for (let i = 0; i < n; i++) p[i] /= kept;
      else p[0] = 1;
    }
    yield p;
  }
}
