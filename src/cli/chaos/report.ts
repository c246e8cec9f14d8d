// What a chaos run reports: the figures of each phase and the invariants it checked, each with a line that says
// what was seen (the first few offenders named).
import type { Flatness } from "./checks.ts";
import type { ChaosProfile } from "./profiles.ts";

export interface Invariant {
  name: string;
  ok: boolean;
  detail: string;
}

export interface ChaosReport {
  profile: ChaosProfile["name"];
  seed: number;
  durationMs: number;
  loadAverage: { start: number[]; end: number[] };
  /** Applied healthy objects (with the probes), the GpuVms and GpuDisks the pools made, hostile objects. */
  objects: { healthy: number; poolReplicas: number; hostile: number; byKind: Record<string, number> };
  faults: { simulator: Record<string, number>; kubernetes: Record<string, number> };
  kills: { total: number; inFlight: { change: string; operationInFlight: boolean }[] };
  /** SIGSTOPs of the leader past its Lease. */
  freezes: number;
  /** RESETs asked for (annotations), carried out by the cloud, and FAILED (sent again). */
  resets: { asked: number; carriedOut: number; failed: number };
  duplicates: number;
  leaks: number;
  stuckFinalizers: number;
  ownedSecretsLeft: number;
  cloudLeftAfterDelete: number;
  convergeAfterFaultsMs: number | undefined;
  peakRssBytes: number;
  /** Peak RSS of any replica in each phase, in its order. */
  peakRssByPhase: Record<string, number>;
  /** Under faults: from applying every object until all of them were Ready (undefined: not before faults stopped). */
  allReadyUnderFaultsMs: number | undefined;
  steady: Flatness[];
  hostile: { aloneMs: number; besideMs: number; ratio: number; hits: Record<string, number> };
  logs: { lines: number; errorLines: number; crashes: number; secretLeaks: number };
  invariants: Invariant[];
  stateDir: string;
}

/** Up to five offenders after a colon, `…` when there are more. */
export function detailOf(items: readonly string[]): string {
  return items.length === 0 ? "" : `: ${items.slice(0, 5).join("; ")}${items.length > 5 ? "; …" : ""}`;
}

/** The invariants checked so far, each said as it is checked (progress lines). */
export class Invariants {
  readonly checked: Invariant[] = [];
  readonly #say: (line: string) => void;

  constructor(say: (line: string) => void) {
    this.#say = say;
  }

  check(name: string, ok: boolean, detail: string): void {
    this.checked.push({ name, ok, detail });
    this.#say(`${ok ? "ok  " : "FAIL"} ${name}: ${detail}`);
  }
}
