// The two chaos profiles: `full` (what the issue asks: 500 objects of every kind, 10 kills, 4 freezes, minutes of
// faults) and `ci` (60 objects, 2 kills and a freeze, a few minutes on a shared 2-core machine). Both check the same
// invariants.

export interface ChaosProfile {
  name: "full" | "ci";
  /** Objects per kind in the healthy namespaces (split over two tenants). */
  networks: number;
  disks: number;
  vms: number;
  rules: number;
  /** GpuVmPools of POOL_REPLICAS replicas with one disk each (their GpuVms and GpuDisks are the operator's). */
  pools: number;
  /** Objects in each hostile tenant's namespace. */
  hostileObjects: number;
  /** SIGKILLs of the leading replica while faults are on (two of them during a disk resize / VM type change). */
  kills: number;
  /** SIGSTOPs of the leading replica past its Lease (the standby takes over), then SIGCONT. */
  freezes: number;
  /** Every this many VMs one is asked for a RESET (annotation) while faults are on. */
  resetEvery: number;
  /** How long faults stay on. */
  chaosMs: number;
  /** After the faults stop: how long every healthy object may take to be Ready. */
  convergeTimeoutMs: number;
  /** How long deleting everything may take. */
  deleteTimeoutMs: number;
  /** Memory and file descriptors are watched this long once everything is Ready. */
  steadyMs: number;
  /** How long a simulated cloud operation takes. */
  operationLatencyMs: number;
}

export const PROFILES: Readonly<Record<ChaosProfile["name"], ChaosProfile>> = {
  full: {
    name: "full",
    networks: 50,
    disks: 150,
    vms: 145,
    rules: 150,
    pools: 5,
    hostileObjects: 6,
    kills: 10,
    freezes: 4,
    resetEvery: 3,
    chaosMs: 240_000,
    convergeTimeoutMs: 600_000,
    deleteTimeoutMs: 600_000,
    steadyMs: 60_000,
    operationLatencyMs: 1500,
  },
  ci: {
    name: "ci",
    networks: 6,
    disks: 18,
    vms: 17,
    rules: 18,
    pools: 1,
    hostileObjects: 2,
    kills: 2,
    freezes: 1,
    resetEvery: 3,
    chaosMs: 45_000,
    convergeTimeoutMs: 240_000,
    deleteTimeoutMs: 240_000,
    steadyMs: 15_000,
    operationLatencyMs: 1000,
  },
};

export const POOL_REPLICAS = 2;

export function isProfileName(name: string): name is ChaosProfile["name"] {
  return name === "full" || name === "ci";
}
