import { describe, expect, it } from "vitest";
import { exposedSampleNames, metricNamesOf } from "./promql.ts";

describe("metricNamesOf", () => {
  it("finds the metrics of an expression, not its functions, labels, ranges or variables", () => {
    expect(
      metricNamesOf(
        'histogram_quantile(0.99, sum by (name, le) (rate(workqueue_queue_duration_seconds_bucket{name=~"gpuvm|x"}[$__rate_interval])))',
      ),
    ).toEqual(["workqueue_queue_duration_seconds_bucket"]);
    expect(
      metricNamesOf(
        "sum by (ns) (rate(a_total[5m])) / on (ns) group_left (x) sum without (pod) (b_total offset 1h) > 0.1 and absent(c)",
      ),
    ).toEqual(["a_total", "b_total", "c"]);
    expect(metricNamesOf('sum(gpucloud_usage_gpu_seconds{project="p"}) / 3600')).toEqual([
      "gpucloud_usage_gpu_seconds",
    ]);
  });
});

describe("exposedSampleNames", () => {
  it("lists families and the sample names of histograms", () => {
    const names = exposedSampleNames("# HELP a x\n# TYPE a counter\na 1\n# TYPE h_seconds histogram\n");
    expect([...names].sort()).toEqual(["a", "h_seconds", "h_seconds_bucket", "h_seconds_count", "h_seconds_sum"]);
  });
});
