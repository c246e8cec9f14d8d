// `gpuvm-operator chaos` (npm run chaos): the operator under faults, SIGKILLs and hostile tenants, with the
// invariants checked at the end. Prints a table of figures, writes them as JSON, and exits 0 only when every
// invariant holds. See docs/chaos.md.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { isProfileName, PROFILES } from "../chaos/profiles.ts";
import type { ChaosReport } from "../chaos/report.ts";
import { flagsOrExitCode, parseFlags, UsageError } from "../usage.ts";

const HELP = `Usage: gpuvm-operator chaos [flags]        (npm run chaos -- [flags])

Runs the operator (two replicas with leader election) against the cloud API simulator and the Kubernetes API
test double under faults: cloud 5xx, 429, lost answers, FAILED operations, latency spikes; dropped watches,
410 Gone, 409 on status writes; SIGKILLs of the leader (also while a disk resize and a VM type change are in
flight) and freezes of the leader past its Lease (SIGSTOP, then SIGCONT); RESETs asked for meanwhile; and
hostile tenants (a cloud that never answers, endless answers, malformed JSON) and a trespasser (a tenant in
other namespaces that points its objects at their cloud resources, edits status, switches policies and
Secrets). Then checks: every healthy object Ready, one cloud resource per object, no resource changed by an
object that does not own it, nothing made in an account the user did not name, no RESET twice for one
annotation, no write from a replica without its Lease, nothing left after deleting everything, no crash,
memory and file descriptors flat, no secret in any log line.

Flags:
  --profile <name>   full (default): 500 objects, 10 kills, 4 freezes; ci: about 60 objects, 2 kills, 1 freeze
  --seed <n>         seed of every random choice (default: random, printed); the same seed repeats the run
  --out <file>       where the figures go as JSON (default chaos-report.json)
  --state-dir <dir>  kubeconfig and operator logs (default: a new temporary directory)
  --keep-state       keep the state directory also when every invariant holds
  -h, --help         show this help

Exit code: 0 when every invariant holds, 1 when one is broken, 2 for bad flags.
`;

interface ChaosFlags {
  profile: (typeof PROFILES)[keyof typeof PROFILES];
  seed: number;
  out: string;
  stateDir: string | undefined;
  keepState: boolean;
}

export function parseChaosArgs(argv: string[]): ChaosFlags | "help" {
  const { values } = parseFlags({
    args: argv,
    options: {
      profile: { type: "string" },
      seed: { type: "string" },
      out: { type: "string" },
      "state-dir": { type: "string" },
      "keep-state": { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help === true) return "help";
  const profileName = values.profile ?? "full";
  if (!isProfileName(profileName)) throw new UsageError(`--profile: expected full or ci, got '${profileName}'`);
  let seed = Math.floor(Math.random() * 2 ** 31);
  if (values.seed !== undefined) {
    seed = Number(values.seed);
    if (!Number.isInteger(seed) || seed < 0 || seed >= 2 ** 32) {
      throw new UsageError(`--seed: expected a whole number from 0 to 4294967295, got '${values.seed}'`);
    }
  }
  return {
    profile: PROFILES[profileName],
    seed,
    out: values.out ?? "chaos-report.json",
    stateDir: values["state-dir"],
    keepState: values["keep-state"] === true,
  };
}

export async function main(argv: string[]): Promise<number> {
  const flags = await flagsOrExitCode("chaos", HELP, () => parseChaosArgs(argv));
  if (typeof flags === "number") return flags;
  const stateDir = flags.stateDir ?? (await mkdtemp(path.join(tmpdir(), "gpuvm-chaos-")));
  const say = (line: string): void => void process.stderr.write(`[chaos] ${line}\n`);
  say(`profile ${flags.profile.name}, seed ${flags.seed}, state in ${stateDir}`);
  const { runChaos } = await import("../chaos/run.ts");
  const report = await runChaos({ profile: flags.profile, seed: flags.seed, stateDir, say });
  await writeFile(flags.out, `${JSON.stringify(report, null, 2)}\n`);
  process.stdout.write(`${figuresTable(report)}\n`);
  const broken = report.invariants.filter((invariant) => !invariant.ok);
  process.stdout.write(
    broken.length === 0
      ? `every invariant holds (figures in ${flags.out})\n`
      : `${broken.length} invariant(s) broken: ${broken.map((b) => b.name).join(", ")} (figures in ${flags.out}, logs in ${stateDir}/logs)\n`,
  );
  if (broken.length === 0 && !flags.keepState && flags.stateDir === undefined) {
    await rm(stateDir, { recursive: true, force: true });
  }
  return broken.length === 0 ? 0 : 1;
}

/** The figures as a two-column table, for people. */
export function figuresTable(report: ChaosReport): string {
  const mib = (bytes: number): string => `${Math.round(bytes / 1024 / 1024)} MiB`;
  const counts = (record: Record<string, number>): string =>
    Object.entries(record)
      .map(([key, n]) => `${key} ${n}`)
      .join(", ") || "none";
  const rows: [string, string][] = [
    ["profile / seed", `${report.profile} / ${report.seed}`],
    [
      "load average (1, 5, 15 min) at start / end",
      `${report.loadAverage.start.join(" ")} / ${report.loadAverage.end.join(" ")}`,
    ],
    [
      "objects (healthy applied + pool replicas / hostile)",
      `${report.objects.healthy} + ${report.objects.poolReplicas} / ${report.objects.hostile} (${counts(report.objects.byKind)})`,
    ],
    ["cloud faults injected", counts(report.faults.simulator)],
    ["Kubernetes faults injected", counts(report.faults.kubernetes)],
    ["SIGKILLs of the leader", String(report.kills.total)],
    ...report.kills.inFlight.map((kill): [string, string] => [
      `  during ${kill.change}`,
      kill.operationInFlight ? "operation in flight" : "requested",
    ]),
    ["freezes of the leader past its Lease", String(report.freezes)],
    [
      "RESETs asked for / carried out / FAILED",
      `${report.resets.asked} / ${report.resets.carriedOut} / ${report.resets.failed}`,
    ],
    ["duplicates", String(report.duplicates)],
    ["leaks", String(report.leaks)],
    ["stuck finalizers", String(report.stuckFinalizers)],
    [
      "owned Secrets left / cloud resources left after delete",
      `${report.ownedSecretsLeft} / ${report.cloudLeftAfterDelete}`,
    ],
    [
      "time to converge after faults stop",
      report.convergeAfterFaultsMs === undefined
        ? "did not converge"
        : `${(report.convergeAfterFaultsMs / 1000).toFixed(1)} s`,
    ],
    [
      "every healthy object Ready under faults after",
      report.allReadyUnderFaultsMs === undefined
        ? "not while faults were on"
        : `${(report.allReadyUnderFaultsMs / 1000).toFixed(1)} s`,
    ],
    ["peak RSS (any replica)", mib(report.peakRssBytes)],
    [
      "  by phase",
      Object.entries(report.peakRssByPhase)
        .map(([phase, bytes]) => `${phase} ${bytes === 0 ? "(no sample)" : mib(bytes)}`)
        .join(", "),
    ],
    ...report.steady.map((r): [string, string] => [
      `steady ${r.replica}: RSS, fds`,
      `${mib(r.firstRssBytes)} → ${mib(r.lastRssBytes)}, ${r.firstFds} → ${r.lastFds}`,
    ]),
    [
      "healthy VM to Ready: alone / beside hostile tenants",
      `${(report.hostile.aloneMs / 1000).toFixed(2)} s / ${(report.hostile.besideMs / 1000).toFixed(2)} s (×${report.hostile.ratio})`,
    ],
    ["hostile endpoints hit (dead, huge, malformed)", counts(report.hostile.hits)],
    [
      "log lines (errors) / crash lines / secret leaks",
      `${report.logs.lines} (${report.logs.errorLines}) / ${report.logs.crashes} / ${report.logs.secretLeaks}`,
    ],
    ["run time", `${(report.durationMs / 1000).toFixed(0)} s`],
    ...report.invariants.map((invariant): [string, string] => [
      `${invariant.ok ? "ok  " : "FAIL"} ${invariant.name}`,
      invariant.ok ? "" : invariant.detail,
    ]),
  ];
  const width = Math.max(...rows.map(([label]) => label.length));
  return rows.map(([label, value]) => `${label.padEnd(width)}  ${value}`).join("\n");
}
