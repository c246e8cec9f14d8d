// `npm run bench:footprint`: what the informer's cache holds per GpuVm, held in full and only noted (sharding,
// ADR 0032), in-process. N Ready GpuVms as an operator leaves them after adopting (their own names, uids, ids,
// addresses and times, each parsed from its own JSON as a list page is), upserted into an InformerCache without a
// view (all held) and with a view that keeps none (all noted, `noteOf` of shard-view.ts); V8's used heap after
// full collections, per object. The capacity model of docs/scaling.md ("Memory per shard") is built from these.
//
//   npm run bench:footprint -- --n 30000

import { parseArgs } from "node:util";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import type { KubernetesObject } from "@kubernetes/client-node";
import pino from "pino";
import { noteOf } from "../src/controllers/managed/shard-view.ts";
import { InformerCache, type InformerView } from "../src/runtime/informer-cache.ts";
import { StringInterner } from "../src/util/intern.ts";

const { values } = parseArgs({ options: { n: { type: "string", default: "30000" } } });
const n = Number(values.n);

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

/** A Ready GpuVm as the operator wrote it after adopting VM `index` (a real one's fields, its own values). */
function readyVmJson(index: number): string {
  const name = `existing-${String(index).padStart(5, "0")}`;
  const hex = index.toString(16).padStart(12, "0");
  const id = `a52339c6-1b23-4eb2-9ee8-${hex}`;
  const time = new Date(Date.UTC(2026, 10, 27, 7, 49, 50) + Math.floor(index / 40) * 1000).toISOString().slice(0, 19);
  const ip = `${(index >> 8) & 255}.${index & 255}`;
  const available = `cloud resource bench-${name} (id ${id}) is available`;
  const condition = (type: string, status: string, message: string) => ({
    lastTransitionTime: `${time}Z`,
    message,
    observedGeneration: 1,
    reason: "Available",
    status,
    type,
  });
  return JSON.stringify({
    apiVersion: "gpucloud.dev/v1alpha1",
    kind: "GpuVm",
    metadata: {
      creationTimestamp: `${time}Z`,
      finalizers: ["gpucloud.dev/finalizer"],
      generation: 1,
      name,
      namespace: "bench",
      resourceVersion: String(30_000 + index),
      uid: `f763332b-b870-43cf-94d8-${hex}`,
    },
    spec: {
      credentialsRef: { name: "gpucloud-credentials" },
      deletionPolicy: "Delete",
      id,
      managementPolicy: "Manage",
      powerState: "Running",
      type: "a40.1x",
    },
    status: {
      attachedDisks: [],
      cloudName: name,
      conditions: [
        condition("Ready", "True", available),
        condition("Reconciling", "False", available),
        condition("Stalled", "False", available),
        condition("Synced", "True", "the cloud resource matches the spec"),
      ],
      hourlyPriceUSD: 1.1,
      id,
      location: "us-east1-a",
      observedGeneration: 1,
      printableState: "RUNNING",
      privateIP: `10.0.${ip}`,
      projectId: "6a3c5d2e-0000-4000-8000-000000000001",
      publicIP: `198.18.${ip}`,
      sshDestination: `ubuntu@198.18.${ip}`,
      state: "STATE_RUNNING",
      type: "a40.1x",
    },
  });
}

function usedHeap(): number {
  for (let i = 0; i < 3; i++) gc();
  return process.memoryUsage().heapUsed;
}

/** Bytes of used heap per object for a cache of `n` objects with this view (none: all held). */
function perObject(view: InformerView<KubernetesObject> | undefined): number {
  const before = usedHeap();
  // A table of its own, as the process's shared one (counted: the operator has one).
  const interner = new StringInterner();
  const logger = pino({ level: "silent" });
  const cache = new InformerCache({ namespaced: true, logger, interner, ...(view ? { view } : {}) });
  for (let index = 0; index < n; index++) cache.upsert(JSON.parse(readyVmJson(index)) as KubernetesObject);
  const after = usedHeap();
  if (cache.sizes().held + cache.sizes().noted !== n) throw new Error("the cache lost objects");
  return (after - before) / n;
}

// Once each first: the compiled code is not counted in what follows.
perObject(undefined);
perObject({ keep: () => false, note: noteOf });
const held = perObject(undefined);
const noted = perObject({ keep: () => false, note: noteOf });
process.stdout.write(
  `${n} Ready GpuVms: held in full ${(held / 1024).toFixed(2)} KiB each (${((held * n) / 2 ** 20).toFixed(1)} MiB), ` +
    `noted ${(noted / 1024).toFixed(2)} KiB each (${((noted * n) / 2 ** 20).toFixed(1)} MiB)\n`,
);
