import { describe, expect, it } from "vitest";
import { type ConfigResult, type OperatorConfig, parseConfig } from "../../src/runtime/config.ts";
import { helpText } from "../../src/runtime/config-flags.ts";
import { formatMicroTime, jitter, parseDuration } from "../../src/runtime/time.ts";

function configOf(result: ConfigResult): OperatorConfig {
  if (result.kind !== "config") throw new Error(`expected a config, got ${JSON.stringify(result)}`);
  return result.config;
}

function errorOf(result: ConfigResult): string {
  if (result.kind !== "error") throw new Error(`expected an error, got ${result.kind}`);
  return result.message;
}

describe("parseConfig", () => {
  it("has controller-runtime's defaults", () => {
    const config = configOf(parseConfig([], {}));
    expect(config).toMatchObject({
      kubeconfig: undefined,
      watchNamespaces: [],
      leaderElect: false,
      leaderElectionNamespace: "default",
      metricsBindAddress: { host: "0.0.0.0", port: 8080 },
      healthProbeBindAddress: { host: "0.0.0.0", port: 8081 },
      maxConcurrentReconciles: 32,
      syncPeriodMs: 600_000,
      leaseDurationMs: 15_000,
      renewDeadlineMs: 10_000,
      retryPeriodMs: 2000,
      gracefulShutdownTimeoutMs: 30_000,
      apiRateLimit: 20,
      apiBurst: 40,
      maxReconcileRate: 0,
      operationPolling: "batched",
      shard: { index: 0, count: 1 },
      logLevel: "info",
      operationPollIntervalMs: 2000,
      cacheSyncTimeoutMs: 120_000,
    });
  });

  it("reads the scale flags: rate and burst, reconcile rate, operation polling, shards", () => {
    const config = configOf(
      parseConfig(
        [
          "--api-rate-limit=5",
          "--api-burst=10",
          "--max-reconcile-rate=1",
          "--operation-polling=per-operation",
          "--shard-count=3",
          "--shard-index=2",
        ],
        {},
      ),
    );
    expect(config).toMatchObject({
      apiRateLimit: 5,
      apiBurst: 10,
      maxReconcileRate: 1,
      operationPolling: "per-operation",
      shard: { index: 2, count: 3 },
    });
    expect(errorOf(parseConfig(["--shard-count=2", "--shard-index=2"], {}))).toMatch(/--shard-index.*0 to 1/);
    expect(errorOf(parseConfig(["--shard-index=-1"], {}))).toContain("--shard-index");
    expect(errorOf(parseConfig(["--operation-polling=sometimes"], {}))).toContain("--operation-polling");
    expect(errorOf(parseConfig(["--max-reconcile-rate=-1"], {}))).toContain("--max-reconcile-rate");
  });

  it("allows only --api-url and --allowed-api-urls as API URLs, normalised; nothing by default", () => {
    expect(configOf(parseConfig([], {})).allowedApiUrls).toEqual([]);
    const config = configOf(
      parseConfig(
        [
          "--api-url=https://API.example.com/v0.1/",
          "--allowed-api-urls",
          "https://eu.example.com/v0.1,http://[0::1]:8070",
          "--allowed-api-urls=https://api.example.com/v0.1",
        ],
        {},
      ),
    );
    expect(config.allowedApiUrls).toEqual([
      "https://eu.example.com/v0.1",
      "http://[::1]:8070",
      "https://api.example.com/v0.1",
    ]);
    expect(errorOf(parseConfig(["--allowed-api-urls=http://h/v0.1?x="], {}))).toMatch(
      /--allowed-api-urls: "http:\/\/h\/v0.1\?x=" must not have a query/,
    );
    expect(errorOf(parseConfig(["--api-url=http://u:p@h/v0.1"], {}))).toMatch(/--api-url: .* user name/);
  });

  it("reads the request timeout, the answer size limit and the per-account concurrency", () => {
    const defaults = configOf(parseConfig([], {}));
    expect(defaults).toMatchObject({ apiTimeoutMs: 10_000, apiMaxResponseBytes: 4 * 1024 * 1024 });
    expect(defaults.apiAccountConcurrency).toBe(31); // 32 workers minus one
    expect(configOf(parseConfig(["--max-concurrent-reconciles=1"], {})).apiAccountConcurrency).toBe(1);
    const set = configOf(
      parseConfig(["--api-timeout=3s", "--api-max-response-size=512Ki", "--api-account-concurrency=2"], {}),
    );
    expect(set).toMatchObject({ apiTimeoutMs: 3000, apiMaxResponseBytes: 512 * 1024, apiAccountConcurrency: 2 });
    expect(configOf(parseConfig(["--api-max-response-size=65536"], {})).apiMaxResponseBytes).toBe(65536);
    expect(errorOf(parseConfig(["--api-max-response-size=8MB"], {}))).toMatch(/--api-max-response-size/);
    expect(errorOf(parseConfig(["--api-max-response-size=10"], {}))).toMatch(/at least 1Ki/);
    expect(errorOf(parseConfig(["--api-account-concurrency=-1"], {}))).toMatch(/--api-account-concurrency/);
  });

  it("reads --cache-sync-timeout, where 0 means wait for ever", () => {
    expect(configOf(parseConfig(["--cache-sync-timeout", "0"], {})).cacheSyncTimeoutMs).toBe(0);
    expect(configOf(parseConfig([], { GPUVM_CACHE_SYNC_TIMEOUT: "30s" })).cacheSyncTimeoutMs).toBe(30_000);
    expect(errorOf(parseConfig(["--cache-sync-timeout=soon"], {}))).toContain("--cache-sync-timeout");
    expect(helpText()).toContain("--cache-sync-timeout <duration>");
    expect(helpText()).toContain("GPUVM_CACHE_SYNC_TIMEOUT");
  });

  it("has no --idle-memory-saver: V8's flags are not changed while the operator runs (ADR 0027)", () => {
    expect(errorOf(parseConfig(["--idle-memory-saver", "1m"], {}))).toBe("unknown flag --idle-memory-saver");
    expect(helpText()).not.toContain("idle-memory-saver");
  });

  it("reads flags in both spellings, repeated and comma-separated namespaces", () => {
    const config = configOf(
      parseConfig(
        [
          "--watch-namespace",
          "team-a,team-b",
          "--watch-namespace=team-c",
          "--leader-elect",
          "--sync-period=5m",
          "--credentials-secret",
          "gpuvm-system/creds",
          "--metrics-bind-address=127.0.0.1:9090",
          "--health-probe-bind-address",
          "0",
          "--api-url=https://api.example.com/v0.1",
        ],
        {},
      ),
    );
    expect(config.watchNamespaces).toEqual(["team-a", "team-b", "team-c"]);
    expect(config.leaderElect).toBe(true);
    expect(config.syncPeriodMs).toBe(300_000);
    expect(config.credentialsSecret).toEqual({ namespace: "gpuvm-system", name: "creds" });
    expect(config.metricsBindAddress).toEqual({ host: "127.0.0.1", port: 9090 });
    expect(config.healthProbeBindAddress).toBeUndefined();
    expect(config.apiUrl).toBe("https://api.example.com/v0.1");
  });

  it("a scalar flag given twice takes the last value (as Go's flag package); only list flags accumulate", () => {
    const config = configOf(
      parseConfig(
        [
          "--metrics-bind-address",
          "127.0.0.1:9090",
          "--metrics-bind-address=:9443",
          "--sync-period=5m",
          "--sync-period",
          "1m",
          "--credentials-secret=a/one",
          "--credentials-secret=b/two",
          "--watch-namespace=team-a",
          "--watch-namespace=team-b",
        ],
        {},
      ),
    );
    expect(config.metricsBindAddress).toEqual({ host: "0.0.0.0", port: 9443 });
    expect(config.syncPeriodMs).toBe(60_000);
    expect(config.credentialsSecret).toEqual({ namespace: "b", name: "two" });
    expect(config.watchNamespaces).toEqual(["team-a", "team-b"]);
  });

  it("reads GPUVM_ environment variables, and flags win over them", () => {
    const env = {
      GPUVM_WATCH_NAMESPACE: "env-ns",
      GPUVM_MAX_CONCURRENT_RECONCILES: "8",
      GPUVM_LEADER_ELECT: "true",
      POD_NAMESPACE: "gpuvm-system",
    };
    const config = configOf(parseConfig(["--max-concurrent-reconciles", "2"], env));
    expect(config.watchNamespaces).toEqual(["env-ns"]);
    expect(config.maxConcurrentReconciles).toBe(2);
    expect(config.leaderElect).toBe(true);
    expect(config.leaderElectionNamespace).toBe("gpuvm-system");
  });

  it.each([
    [["--bogus"], /unknown flag --bogus/],
    [["--sync-period", "10"], /--sync-period: invalid duration "10"/],
    [["--max-concurrent-reconciles=0"], /positive integer/],
    [["--credentials-secret=only-name"], /<namespace>\/<name>/],
    [["--watch-namespace=Bad_NS"], /not a valid namespace/],
    [["--metrics-bind-address=localhost"], /host:port/],
    [["--log-level=loud"], /not one of/],
    [["--api-rate-limit=-1"], /positive number/],
    [["--leader-election-renew-deadline=20s"], /lease duration .* > renew deadline/],
    [["--kubeconfig"], /needs a value/],
    [["positional"], /unexpected argument/],
  ])("rejects %j with a clear message", (argv, message) => {
    expect(errorOf(parseConfig(argv, {}))).toMatch(message);
  });

  it("reports bad environment values under the flag name", () => {
    expect(errorOf(parseConfig([], { GPUVM_LEADER_ELECT: "maybe" }))).toMatch(/--leader-elect: expected true or false/);
  });

  it("recognises --help, and the help text documents every flag with its env var", () => {
    expect(parseConfig(["--sync-period=1m", "--help"], {})).toEqual({ kind: "help" });
    const help = helpText();
    for (const flag of [
      "--kubeconfig",
      "--watch-namespace",
      "--leader-elect",
      "--api-rate-limit",
      "--operation-poll-interval",
    ]) {
      expect(help).toContain(flag);
    }
    expect(help).toContain("GPUVM_WATCH_NAMESPACE");
  });
});

describe("time helpers", () => {
  it("parses Go-style durations", () => {
    expect(parseDuration("30s")).toBe(30_000);
    expect(parseDuration("5m")).toBe(300_000);
    expect(parseDuration("1h30m")).toBe(5_400_000);
    expect(parseDuration("250ms")).toBe(250);
    expect(parseDuration("1.5s")).toBe(1500);
    for (const bad of ["", "30", "5x", "-1s", "s"]) expect(() => parseDuration(bad)).toThrow(/invalid duration/);
  });

  it("formats MicroTime with exactly six fractional digits", () => {
    expect(formatMicroTime(new Date(Date.UTC(2026, 10, 21, 23, 0, 0, 123)))).toBe("2026-11-21T23:00:00.123000Z");
  });

  it("jitters within the fraction", () => {
    expect(jitter(1000, 0.1, () => 0)).toBe(900);
    expect(jitter(1000, 0.1, () => 0.5)).toBe(1000);
    expect(jitter(1000, 0.1, () => 1)).toBe(1100);
  });
});
