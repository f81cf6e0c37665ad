import { test } from "node:test";
import assert from "node:assert/strict";
import { meanInterval, pairedDifference } from "../../src/study/statistics.ts";
import { aggregateResults, studyCsv } from "../../src/study/aggregate.ts";
import { recomputedStatistics } from "../../src/study/recompute.ts";
import type { RunResult } from "../../src/study/result.ts";
import { formatDifference } from "../../src/study/table.ts";
import { claimChecks, direction } from "../../src/study/verdict.ts";

const close = (a: number | null | undefined, b: number, tol = 1e-9) =>
  assert.ok(a !== null && a !== undefined && Math.abs(a - b) <= tol * Math.max(1, Math.abs(b)), `${a} vs ${b}`);

// Hand-computed: t quantiles t_{0.975,3} = 3.182446305, t_{0.975,2} = 4.302652730 (scipy.stats.t.ppf).
test("mean and 95% Student-t interval over seeds match hand-computed values; one value has no interval", () => {
  const s = meanInterval([1, 2, 3, 4])!;
  assert.equal(s.n, 4);
  close(s.mean, 2.5);
  close(s.sd!, Math.sqrt(5 / 3));
  close(s.halfWidth!, 3.182446305283708 * Math.sqrt(5 / 3) / 2);
  close(s.low!, 2.5 - s.halfWidth!);
  const one = meanInterval([0.7, null, NaN])!;
  assert.deepEqual(one, { n: 1, mean: 0.7, sd: null, halfWidth: null, low: null, high: null });
  assert.equal(meanInterval([null]), null);
});

test("paired differences use only the seeds both sides have", () => {
  const d = pairedDifference(new Map([[0, 3], [1, 5], [2, 4], [3, 9]]), new Map([[0, 1], [1, 2], [2, 2], [4, 0]]))!;
  assert.equal(d.n, 3); // diffs 2, 3, 2 (seed 3 has no control, seed 4 no treated run)
  close(d.mean, 7 / 3);
  close(d.halfWidth!, 4.302652729749462 * Math.sqrt(1 / 3) / Math.sqrt(3));
  assert.match(formatDifference(d, false), /^\+2\.33 \[\+0\.899, \+3\.77\] higher$/);
});

function toyRun(lambda: number, seed: number, clean: number, trueL: number, robust: number): RunResult {
  return {
    format: "attnlip-study-run",
    version: 1,
    id: `toy_lambda${lambda}_seed${seed}`,
    data: "mnist",
    model: "vit-micro",
    lambda,
    jasminNorm: "top2",
    reduce: "max-log",
    seed,
    cleanAccuracy: clean,
    testExamples: 100,
    attacked: 10,
    attackedCleanAccuracy: clean,
    robust: [{ norm: "linf", attack: "apgd", eps: 0.1, accuracy: robust, zeroGradient: 0 }],
    analyzed: 4,
    networkTrue: trueL,
    blockTrue: [trueL / 2],
    compositionFloor: trueL * 3,
    networkRatio: { cov: 10 * lambda + seed },
    blockRatio: [{ cov: 2 }],
    meanSigma: 0.3 - lambda / 10,
    meanTop1: 0.5,
    seconds: { train: 1, analyze: 1, attack: 1 },
  };
}

test("aggregation on a toy grid: per lambda mean and interval over seeds, paired differences against lambda 0 of the same seed", () => {
  const runs = [
    toyRun(0, 0, 0.9, 10, 0.5),
    toyRun(0, 1, 0.92, 12, 0.6),
    toyRun(0, 2, 0.94, 14, 0.4),
    toyRun(1, 0, 0.88, 8, 0.55),
    toyRun(1, 1, 0.91, 11, 0.6),
    toyRun(1, 2, 0.91, 11, 0.5),
  ];
  const s = aggregateResults(runs, ["unfinished_run"]);
  assert.equal(s.finished, 6);
  assert.deepEqual(s.unfinished, ["unfinished_run"]);
  assert.equal(s.groups.length, 1);
  const [l0, l1] = s.groups[0].lambdas;
  assert.deepEqual([l0.lambda, l1.lambda], [0, 1]);
  assert.deepEqual(l1.seeds, [0, 1, 2]);
  close(l0.metrics.cleanAccuracy!.mean, 0.92);
  close(l0.metrics.cleanAccuracy!.halfWidth!, 4.302652729749462 * 0.02 / Math.sqrt(3));
  close(l1.metrics.networkTrue!.mean, 10);
  assert.equal(l0.difference, undefined);
  // clean: -0.02, -0.01, -0.03 -> mean -0.02, sd 0.01; true: -2, -1, -3 -> mean -2, sd 1.
  close(l1.difference!.cleanAccuracy!.mean, -0.02);
  close(l1.difference!.cleanAccuracy!.sd!, 0.01);
  close(l1.difference!.networkTrue!.halfWidth!, 4.302652729749462 / Math.sqrt(3));
  close(l1.difference!["robust:linf:apgd:eps=0.1"]!.mean, 0.05);
  close(l1.difference!["blockTrue:0"]!.mean, -1);
  close(l1.difference!["networkRatio:cov"]!.mean, 10);
  assert.equal(l1.difference!["networkRatio:cov"]!.sd, 0);
  const csv = studyCsv(s).trim().split("\n");
  assert.equal(csv[0], "data,model,jasmin_norm,reduce,lambda,metric,n,mean,sd,ci95_low,ci95_high,diff_n,diff_mean,diff_ci95_low,diff_ci95_high");
  const row = csv.find((r) => r.startsWith("mnist,vit-micro,top2,max-log,1,networkTrue,"))!.split(",");
  close(Number(row[12]), -2);
  assert.equal(row[11], "3");
});

test("the paper's claims are checked per lambda: holds, the opposite, or cannot be told from noise", () => {
  const runs = [0, 1, 2].flatMap((seed) => [
    toyRun(0, seed, 0.9, 10 + seed, 0.5),
    // lambda 1: the true constant 2 lower at every seed (clear); robust accuracy 10 points lower (clear, the opposite).
    toyRun(1, seed, 0.9, 8 + seed + seed / 100, 0.4 - seed / 1000),
    // lambda 2: noise either way.
    toyRun(2, seed, 0.9, 10 + seed + [-1, 1, 0.2][seed], 0.5 + [0.05, -0.05, 0.01][seed]),
  ]);
  const group = aggregateResults(runs).groups[0];
  const checks = claimChecks(group);
  const at = (lambda: number, claim: string) => checks.find((c) => c.lambda === lambda && c.claim === claim)!;
  assert.equal(at(1, "lipschitz").direction, "lower");
  assert.equal(at(1, "lipschitz").holds, true);
  assert.equal(at(1, "robustness").direction, "lower");
  assert.equal(at(1, "robustness").holds, false);
  assert.equal(at(2, "lipschitz").holds, null);
  assert.deepEqual(group.verdict, [
    "JaSMin lowers the true network Lipschitz constant: holds at lambda 1; cannot be told from seed-to-seed noise at lambda 2 (2 paired comparison(s) with lambda 0, 95% intervals over seeds)",
    "JaSMin raises robust accuracy: the opposite at lambda 1 linf:apgd:eps=0.1; cannot be told from seed-to-seed noise at lambda 2 linf:apgd:eps=0.1 (2 paired comparison(s) with lambda 0, 95% intervals over seeds)",
  ]);
  assert.equal(direction(meanInterval([1])), "one seed");
});

test("a metric at the same value for every seed with and without JaSMin (robust accuracy 0% everywhere) is reported as no information, not as noise", () => {
  const runs = [0, 1].flatMap((seed) => [toyRun(0, seed, 0.9, 10 + seed, 0), toyRun(1, seed, 0.9, 10 + seed * 2, 0)]);
  const [, robust] = aggregateResults(runs).groups[0].verdict;
  assert.match(robust, /^JaSMin raises robust accuracy: no information at lambda 1 linf:apgd:eps=0\.1 \(the same value at every seed with and without JaSMin\)/);
});

test("study.json keeps each run's own values, from which every mean, interval and paired difference is recomputed exactly (issue 37, part 5)", () => {
  // Seeds given out of order and one run without a robust figure: values follow `seeds`, null kept.
  const runs = [
    toyRun(0, 2, 0.94, 14, 0.4),
    toyRun(0, 0, 0.9, 10, 0.5),
    toyRun(0, 1, 0.92, 12, 0.6),
    toyRun(1, 1, 0.91, 11, 0.6),
    toyRun(1, 0, 0.88, 8, 0.55),
    { ...toyRun(1, 2, 0.91, 11, 0.5), robust: [] },
  ];
  const group = aggregateResults(runs).groups[0];
  const [l0, l1] = group.lambdas;
  assert.deepEqual(l0.seeds, [0, 1, 2]);
  assert.deepEqual(l0.values!.cleanAccuracy, [0.9, 0.92, 0.94]);
  assert.deepEqual(l1.values!.networkTrue, [8, 11, 11]);
  const robustName = Object.keys(l1.values!).find((n) => n.startsWith("robust:"))!;
  assert.deepEqual(l1.values![robustName], [0.55, 0.6, null]);
  const again = recomputedStatistics(group);
  for (const [i, l] of group.lambdas.entries()) {
    assert.deepEqual(again[i].metrics, l.metrics);
    assert.deepEqual(again[i].difference, l.difference);
  }
  // A study aggregated before values were kept cannot be recomputed, and says so.
  const { values: _dropped, ...old } = l1;
  assert.throws(() => recomputedStatistics({ lambdas: [l0, old] }), /lambda 1 has no values/);
  assert.throws(
    () => recomputedStatistics({ lambdas: [{ ...l0, values: { cleanAccuracy: [0.9] } }] }),
    /lambda 0: "cleanAccuracy" has 1 values for 3 seeds/,
  );
});
