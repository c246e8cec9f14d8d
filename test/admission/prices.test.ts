// Prices: the seed's table by family and the disk price per GB-hour, overridden by a ConfigMap's prices.yaml
// (refused whole, with the field named, when malformed); label selectors as Kubernetes reads them; priorities.
import { describe, expect, it } from "vitest";
import { DEFAULT_PRICES, PriceConfigError, parsePriceOverrides } from "../../src/admission/prices.ts";
import { cappedPriority, comparePrecedence, priorityOf } from "../../src/admission/priority.ts";
import { selects } from "../../src/admission/selector.ts";

describe("prices", () => {
  it("are the spec's: per GPU-hour by family times the GPUs, disks per GB-hour", () => {
    expect(DEFAULT_PRICES.vm("a100-80gb.8x")).toEqual({ micros: 14_480_000, gpus: 8, gpuModel: "a100-80gb" });
    expect(DEFAULT_PRICES.vm("a40.1x")).toEqual({ micros: 1_100_000, gpus: 1, gpuModel: "a40" });
    expect(DEFAULT_PRICES.vmHourlyUSD("l40s-48gb.10x")).toBe(12.5);
    expect(DEFAULT_PRICES.vm("h100.8x")).toBeUndefined();
    // 1 TiB = 1099.5 GB × $0.00013 = $0.142937/h (rounded up to the micro-dollar).
    expect(DEFAULT_PRICES.disk(2 ** 40)).toEqual({ micros: 142_937, gpus: 0 });
  });

  it("take overrides from prices.yaml", () => {
    const prices = parsePriceOverrides(
      "gpuHourUSD:\n  a100-80gb: 1.5\ndiskGbHourUSD: 0.0002\n",
      "ConfigMap gpuvm-system/prices",
    );
    expect(prices.vm("a100-80gb.8x")?.micros).toBe(12_000_000);
    expect(prices.vm("a40.2x")?.micros).toBe(2_200_000);
    expect(prices.disk(1e12).micros).toBe(200_000);
    expect(parsePriceOverrides("", "empty").vm("a40.1x")?.micros).toBe(1_100_000);
  });

  it.each([
    [
      "an unknown family",
      "gpuHourUSD:\n  h100: 3\n",
      "gpuHourUSD.h100: unknown VM type family h100: one of a40, a100, a100-80gb, l40s-48gb",
    ],
    ["a negative price", "diskGbHourUSD: -1\n", "diskGbHourUSD: Too small"],
    ["an unknown key", "gpuHourUsd:\n  a40: 1\n", 'Unrecognized key: "gpuHourUsd"'],
    ["text that is not YAML", "gpuHourUSD: [a40\n", "not YAML"],
    ["an alias bomb", "a: &a [1]\nb: *a\n", "not YAML"],
  ])("refuse %s whole, naming the source and the field", (_label, text, message) => {
    const attempt = () => parsePriceOverrides(text, "ConfigMap gpuvm-system/prices");
    expect(attempt).toThrow(PriceConfigError);
    expect(attempt).toThrow(message);
    expect(attempt).toThrow(/^ConfigMap gpuvm-system\/prices: /);
  });
});

describe("label selectors", () => {
  const labels = { team: "vision", tier: "batch" };
  it.each([
    [undefined, true],
    [{}, true],
    [{ matchLabels: { team: "vision" } }, true],
    [{ matchLabels: { team: "nlp" } }, false],
    [{ matchExpressions: [{ key: "tier", operator: "In" as const, values: ["batch", "dev"] }] }, true],
    [{ matchExpressions: [{ key: "tier", operator: "NotIn" as const, values: ["batch"] }] }, false],
    [{ matchExpressions: [{ key: "owner", operator: "NotIn" as const, values: ["x"] }] }, true],
    [{ matchExpressions: [{ key: "team", operator: "Exists" as const }] }, true],
    [{ matchExpressions: [{ key: "team", operator: "DoesNotExist" as const }] }, false],
    [
      {
        matchLabels: { team: "vision" },
        matchExpressions: [{ key: "tier", operator: "In" as const, values: ["dev"] }],
      },
      false,
    ],
  ])("%j selects {team: vision, tier: batch}: %s", (selector, expected) => {
    expect(selects(selector, labels)).toBe(expected);
  });
});

describe("priorities", () => {
  it("default to 0, are capped by budgets, and order by priority, then since, then uid", () => {
    expect(priorityOf({})).toBe(0);
    expect(priorityOf({ priority: 5000 })).toBe(1000);
    expect(cappedPriority(50, [undefined, 10, 20])).toBe(10);
    const order = [
      { priority: 0, sinceMs: 2, uid: "b" },
      { priority: 0, sinceMs: 2, uid: "a" },
      { priority: 5, sinceMs: 9, uid: "z" },
      { priority: 0, sinceMs: 1, uid: "y" },
    ].sort(comparePrecedence);
    expect(order.map((p) => p.uid)).toEqual(["z", "y", "a", "b"]);
  });
});
