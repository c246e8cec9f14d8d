// The claim store: one winner per slot, whoever races; what a process wrote is seen before its cache shows it;
// a key that lost is woken when the claim changes hands; a claim whose holder is gone is swept only on a live read.

import pino from "pino";
import { describe, expect, it } from "vitest";
import { claimNameOf } from "../../../src/api/gpu-cloud-claim.ts";
import { accountOf } from "../../../src/controllers/accounts/account.ts";
import { claimSweepReconciler } from "../../../src/controllers/managed/claim-sweep.ts";
import { MemoryClaimRecords, memoryClaims } from "../memory-claims.ts";

const account = accountOf("https://cloud.test/v0.1/", "project-1");
const slot = (cloudName: string) => ({ kind: "GpuVm" as const, ...account, cloudName });
const holder = (name: string, uid = `uid-${name}`) => ({ namespace: "ns", name, uid });

describe("ClaimStore", () => {
  it("normalises the account, so two spellings of one API URL are one slot", () => {
    expect(account.apiUrl).toBe("https://cloud.test/v0.1");
    expect(claimNameOf(slot("vm"))).toBe(claimNameOf({ ...slot("vm"), apiUrl: "https://cloud.test/v0.1" }));
    expect(claimNameOf(slot("vm"))).toMatch(/^gpuvm-[0-9a-f]{40}$/);
  });

  it("gives one slot to one holder, however many processes race for it", async () => {
    const records = new MemoryClaimRecords();
    const first = records.attach();
    const second = records.attach(); // another replica, whose cache has not seen the first one's claim
    const [a, b] = await Promise.all([
      first.acquire(slot("vm"), holder("a"), "ns/a"),
      second.acquire(slot("vm"), holder("b"), "ns/b"),
    ]);
    expect([a.type, b.type].sort()).toEqual(["held", "taken"]);
    expect(a.claim.holder.uid).toBe(b.claim.holder.uid);
    expect(records.writes.filter((write) => write.startsWith("create"))).toEqual(["create vm"]);
    // The same holder asking again holds it (a pass after a crash).
    const again = await first.acquire(slot("vm"), a.claim.holder, `ns/${a.claim.holder.name}`);
    expect(again.type).toBe("held");
  });

  it("records the id with a version check, finds the claim by id and by holder, and wakes the losers on release", async () => {
    const woken: string[] = [];
    const { store } = memoryClaims({ wake: (kind, key) => woken.push(`${kind} ${key}`) });
    const held = await store.acquire(slot("vm"), holder("a"), "ns/a");
    if (held.type !== "held") throw new Error("not held");
    const written = await store.recordId(held.claim, "res-1");
    expect(written.type).toBe("written");
    // A write from a stale copy (the version has moved on) is refused.
    expect((await store.recordId(held.claim, "res-2")).type).toBe("conflict");
    expect(store.ofId("GpuVm", account, "res-1")?.holder.name).toBe("a");
    expect(store.heldBy("GpuVm", "uid-a")?.id).toBe("res-1");
    expect(store.heldBy("GpuDisk", "uid-a")).toBeUndefined();
    expect((await store.acquire(slot("vm"), holder("b"), "ns/b")).type).toBe("taken");
    const current = store.heldBy("GpuVm", "uid-a");
    if (current === undefined) throw new Error("no claim");
    await store.release(current);
    expect(woken).toEqual(["GpuVm ns/b"]);
    expect(store.ofId("GpuVm", account, "res-1")).toBeUndefined();
    expect((await store.acquire(slot("vm"), holder("b"), "ns/b")).type).toBe("held");
  });

  it("keeps the id and holder indexes apart by kind and account, with several claims per key", async () => {
    const { store } = memoryClaims();
    const other = accountOf("https://other.test/v0.1", "project-2");
    const vm = await store.acquire(slot("vm"), holder("a"), "ns/a");
    const disk = await store.acquire({ ...slot("disk"), kind: "GpuDisk" }, holder("a"), "ns/a");
    const elsewhere = await store.acquire({ kind: "GpuVm", ...other, cloudName: "vm" }, holder("b"), "ns/b");
    if (vm.type !== "held" || disk.type !== "held" || elsewhere.type !== "held") throw new Error("not held");
    // One resource id in two accounts, and again as a disk's: three claims under one id.
    await store.recordId(vm.claim, "same-id");
    await store.recordId(elsewhere.claim, "same-id");
    await store.recordId(disk.claim, "same-id");
    expect(store.ofId("GpuVm", account, "same-id")?.holder.name).toBe("a");
    expect(store.ofId("GpuVm", other, "same-id")?.holder.name).toBe("b");
    expect(store.ofId("GpuDisk", account, "same-id")?.cloudName).toBe("disk");
    expect(store.ofId("GpuDisk", other, "same-id")).toBeUndefined();
    // One holder with two claims (a VM's and a disk's of the same object uid).
    expect(store.heldBy("GpuVm", "uid-a")?.cloudName).toBe("vm");
    expect(store.heldBy("GpuDisk", "uid-a")?.cloudName).toBe("disk");
    const current = store.heldBy("GpuVm", "uid-a");
    if (current === undefined) throw new Error("no claim");
    await store.release(current);
    expect(store.heldBy("GpuVm", "uid-a")).toBeUndefined();
    expect(store.heldBy("GpuDisk", "uid-a")?.cloudName).toBe("disk");
    expect(store.ofId("GpuVm", account, "same-id")).toBeUndefined();
    expect(store.ofId("GpuDisk", account, "same-id")?.holder.name).toBe("a");
    expect(store.ofId("GpuVm", other, "same-id")?.holder.name).toBe("b");
  });

  it("the sweep releases a claim only when a live read says its holder is gone", async () => {
    const { records, store } = memoryClaims();
    const claim = records.seed(slot("vm"), holder("a"), "res-1");
    let live: { metadata: { uid: string } }[] = [{ metadata: { uid: "uid-a" } }];
    const reads: string[] = [];
    const sweep = claimSweepReconciler({
      claims: store,
      claimsNamespace: "gpuvm-system",
      kinds: new Map([
        [
          "GpuVm",
          {
            resource: { group: "gpucloud.dev", version: "v1alpha1", plural: "gpuvms", kind: "GpuVm", namespaced: true },
            cachedUid: () => undefined, // the cache lacks it: no proof of anything
          },
        ],
      ]),
      kube: {
        listObjects: async (_resource, namespace, selectors) => {
          reads.push(`${namespace} ${selectors.fieldSelector}`);
          return live;
        },
      },
      watchNamespaces: [],
    });
    const ctx = {
      signal: new AbortController().signal,
      logger: pino({ level: "silent" }),
      reconcileId: "r",
      priority: "normal" as const,
    };
    await sweep.reconcile({ namespace: "gpuvm-system", name: claim.objectName }, ctx);
    expect(store.get(claim.objectName)).toBeDefined();
    expect(reads).toEqual(["ns metadata.name=a"]);
    // An object of that name with another uid: the holder was deleted and made again, the claim is not its.
    live = [{ metadata: { uid: "uid-a-again" } }];
    await sweep.reconcile({ namespace: "gpuvm-system", name: claim.objectName }, ctx);
    expect(store.get(claim.objectName)).toBeUndefined();
    expect(records.writes).toEqual(["delete vm"]);
  });
});
