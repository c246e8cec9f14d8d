// The playground's command line: help, flag errors, the operator command it prints, and its log formatting.
import { describe, expect, it } from "vitest";
import { PLAYGROUND_DEFAULTS, parsePlaygroundArgs } from "../../src/cli/playground/flags.ts";
import { formatOperatorLogLine, operatorArgs } from "../../src/cli/playground/operator-process.ts";
import { UsageError } from "../../src/cli/usage.ts";
import { RunningProcess } from "./harness.ts";

describe("gpuvm-operator playground command line", () => {
  it("prints every flag for --help and exits 0", async () => {
    const help = new RunningProcess(["playground", "--help"]);
    const exit = await help.exited;
    expect(exit.code).toBe(0);
    for (const flag of [
      "--port",
      "--cloud-port",
      "--metrics-port",
      "--state-dir",
      "--latency-ms",
      "--profile",
      "--without-operator",
      "--kube",
    ]) {
      expect(help.output).toContain(flag);
    }
  });

  it("rejects a bad flag with a clear message and exit code 2", async () => {
    const bad = new RunningProcess(["playground", "--port", "http"]);
    const exit = await bad.exited;
    expect(exit.code).toBe(2);
    expect(bad.output).toContain('--port: expected a port number 0-65535, got "http"');
  });

  it.each([
    [["--latency-ms", "-5"], "--latency-ms"],
    [["--cloud-port", "70000"], "--cloud-port"],
    [["--colour"], "colour"],
    [["--kube", "k3s"], '--kube: expected double or real, got "k3s"'],
    [["--profile", "spec"], "--profile: expected one of contract, seed-only"],
    [["extra"], "extra"],
  ])("refuses %j", (argv, mention) => {
    expect(() => parsePlaygroundArgs(argv)).toThrow(UsageError);
    expect(() => parsePlaygroundArgs(argv)).toThrow(mention);
  });

  it("has documented defaults", () => {
    const options = parsePlaygroundArgs([]);
    expect(options).toMatchObject({
      port: PLAYGROUND_DEFAULTS.port,
      cloudPort: PLAYGROUND_DEFAULTS.cloudPort,
      latencyMs: 1500,
      profile: "contract",
      withoutOperator: false,
      kube: "double",
    });
    expect(parsePlaygroundArgs(["--kube", "real"])).toMatchObject({ kube: "real" });
    expect(parsePlaygroundArgs(["--profile", "seed-only"])).toMatchObject({ profile: "seed-only" });
    expect(options !== "help" && options.stateDir.endsWith(".playground")).toBe(true);
  });

  it("keeps one state per profile by default, so that the profiles never share one cloud by surprise", () => {
    const seedOnly = parsePlaygroundArgs(["--profile", "seed-only"]);
    expect(seedOnly !== "help" && seedOnly.stateDir.endsWith(".playground-seed-only")).toBe(true);
    const chosen = parsePlaygroundArgs(["--profile", "seed-only", "--state-dir", "/tmp/mine"]);
    expect(chosen !== "help" && chosen.stateDir).toBe("/tmp/mine");
  });

  it("runs the operator with the playground's kubeconfig, simulator and credentials Secret, its claims in gpuvm-system", () => {
    const args = operatorArgs({
      kubeconfigPath: "/tmp/pg/kubeconfig",
      apiUrl: "http://127.0.0.1:9/v0.1",
      metricsPort: 8092,
      healthPort: 8093,
      latencyMs: 1500,
    });
    expect(args.join(" ")).toBe(
      "run --kubeconfig /tmp/pg/kubeconfig --api-url http://127.0.0.1:9/v0.1 --credentials-secret default/gpucloud-credentials " +
        "--claims-namespace gpuvm-system " +
        "--metrics-bind-address 127.0.0.1:8092 --health-probe-bind-address 127.0.0.1:8093 --operation-poll-interval 750ms",
    );
  });

  it("runs the operator as deploy/ does on the real control plane: leader election in its namespace", () => {
    const args = operatorArgs({
      kubeconfigPath: "/tmp/pg/operator.kubeconfig",
      apiUrl: "http://127.0.0.1:9/v0.1",
      metricsPort: 0,
      healthPort: 0,
      latencyMs: 200,
      leaderElectionNamespace: "gpuvm-system",
    });
    expect(args.slice(-3)).toEqual(["--leader-elect", "--leader-election-namespace", "gpuvm-system"]);
  });

  it("runs shards on the real control plane with their Leases in the operator's namespace", () => {
    const args = operatorArgs({
      kubeconfigPath: "/tmp/pg/operator.kubeconfig",
      apiUrl: "http://127.0.0.1:9/v0.1",
      metricsPort: 0,
      healthPort: 0,
      latencyMs: 200,
      leaderElectionNamespace: "gpuvm-system",
      shard: { index: 1, count: 3 },
    });
    expect(args.slice(-7)).toEqual([
      "--shard-count",
      "3",
      "--shard-index",
      "1",
      "--leader-elect",
      "--leader-election-namespace",
      "gpuvm-system",
    ]);
  });

  it("formats pino lines for people and passes other lines through", () => {
    const line = JSON.stringify({
      level: 30,
      time: Date.UTC(2026, 10, 21, 9, 8, 7),
      pid: 1,
      msg: "created",
      kind: "GpuVm",
    });
    expect(formatOperatorLogLine(line)).toBe("09:08:07 INFO  created kind=GpuVm");
    expect(formatOperatorLogLine("    at Object.<anonymous>")).toBe("    at Object.<anonymous>");
    expect(formatOperatorLogLine("[1,2]")).toBe("[1,2]");
  });
});
