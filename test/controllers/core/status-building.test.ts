// Property test: random cloud answers (and annotations) rendered through the status builder always give a
// status the generated CRD accepts, with its conditions. Validated with ajv against crds/*.yaml, the files the
// API server gets. Deterministic by seed (GPUVM_TEST_SEED to replay another).

import { readFileSync } from "node:fs";
import { Ajv, type ValidateFunction } from "ajv";
import addFormats from "ajv-formats";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { REASONS } from "../../../src/api/common.ts";
import type { SchemaNode } from "../../../src/api/crd.ts";
import { KUBERNETES_EXTENSIONS } from "../../../src/api/structural.ts";
import { Disk, FirewallRule, Operation, Vm, VpcNetwork } from "../../../src/cloud/wire.ts";
import { summarizeVm } from "../../../src/controllers/accounts/vm-summary.ts";
import type { ManagedObject, ManagedStatusBase } from "../../../src/controllers/core/object-model.ts";
import { buildStatus } from "../../../src/controllers/core/status-building.ts";
import { fitStatus, fitStatusInPlace, fitText } from "../../../src/controllers/core/status-limits.ts";
import type { Verdict } from "../../../src/controllers/core/verdict.ts";
import { observeDisk } from "../../../src/controllers/kinds/gpu-disk.ts";
import { observeRule } from "../../../src/controllers/kinds/gpu-firewall-rule.ts";
import { networkAtProvider } from "../../../src/controllers/kinds/gpu-network.ts";
import { observeVm } from "../../../src/controllers/kinds/gpu-vm-mappers.ts";
import type { Observation } from "../../../src/controllers/managed/external.ts";
import { recordOperation } from "../../../src/controllers/managed/operation-tracking.ts";
import type { CloudConnection, Pass } from "../../../src/controllers/managed/pass.ts";
import { seededRandom } from "../seeded-random.ts";

const SEED = Number(process.env.GPUVM_TEST_SEED ?? 20261122);
const RUNS_PER_KIND = 150;

class Gen {
  readonly next: () => number;
  constructor(seed: number) {
    this.next = seededRandom(seed);
  }
  int(max: number): number {
    return Math.floor(this.next() * max);
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)] as T;
  }
  /** Mostly short, sometimes empty, sometimes huge; ASCII, unicode, control characters. */
  text(): string {
    const length = this.pick([0, 1, 8, 40, 63, 64, 65, 128, 129, 200, 316, 1024, 4097, 5000, 33_000]);
    const alphabet = this.pick(["abc-XYZ_019.", "äöü€漢字😀", "\n\t\u0000 \"'\\{}", "a"]);
    let chunk = "";
    for (let i = 0; i < Math.min(length, 97); i++) chunk += alphabet[this.int(alphabet.length)] ?? "a";
    return chunk.repeat(Math.ceil(length / Math.max(chunk.length, 1))).slice(0, length);
  }
  /** A realistic value now and then, so that mappings take their interesting branches. */
  textOr(realistic: readonly string[]): string {
    return this.next() < 0.5 ? this.pick(realistic) : this.text();
  }
  timestamp(): string {
    return this.pick(["2026-11-21T12:00:00Z", "2026-11-21T12:00:00.123456Z", "", "yesterday", this.text()]);
  }
  list<T>(make: () => T, max = 20): T[] {
    return Array.from({ length: this.int(max) }, make);
  }
}

function crdStatusSchema(plural: string): SchemaNode {
  const crd = parse(readFileSync(new URL(`../../../crds/gpucloud.dev_${plural}.yaml`, import.meta.url), "utf8")) as {
    spec: { versions: { schema: { openAPIV3Schema: { properties: { status: SchemaNode } } } }[] };
  };
  const version = crd.spec.versions[0];
  if (version === undefined) throw new Error(`no version in ${plural}`);
  return version.schema.openAPIV3Schema.properties.status;
}

const ajv = new Ajv({ allErrors: true, strict: true, strictTypes: false });
addFormats.default(ajv);
for (const keyword of KUBERNETES_EXTENSIONS) ajv.addKeyword({ keyword });

function cloudOperation(gen: Gen): Operation | undefined {
  const parsed = Operation.safeParse({
    operation_id: gen.textOr(["0b31a319-bf97-42aa-94cf-335c644b696e"]),
    state: gen.textOr(["IN_PROGRESS", "SUCCEEDED", "FAILED"]),
    metadata: { operation_name: gen.textOr(["CREATE", "RESET"]), id: gen.text(), type: "vm" },
    result: gen.next() < 0.5 ? null : { code: gen.textOr(["internal_error"]), message: gen.text() },
    started_at: gen.timestamp(),
    completed_at: gen.timestamp(),
  });
  return parsed.success ? parsed.data : undefined;
}

const randomVm = (gen: Gen) =>
  Vm.safeParse({
    id: gen.textOr(["vm-1"]),
    project_id: gen.text(),
    type: gen.textOr(["a100.1x", "a100.2x", "h100-80gb.8x"]),
    state: gen.textOr(["STATE_RUNNING", "STATE_STOPPED", "RUNNING", "STATE_UPDATING"]),
    ssh_destination: gen.textOr(["ubuntu@198.18.0.3"]),
    created_at: gen.timestamp(),
    updated_at: gen.timestamp(),
    name: gen.textOr(["default-trainer"]),
    location: gen.textOr(["us-east1-a"]),
    commitment_period: gen.int(100),
    commitment_end: gen.text(),
    disks: gen.list(() => ({
      id: gen.text(),
      name: gen.text(),
      type: gen.text(),
      size: gen.textOr(["10GiB", "1TiB"]),
      location: gen.text(),
      block_size: 4096,
      created_at: gen.timestamp(),
      updated_at: gen.timestamp(),
      serial_number: gen.text(),
      attachment_type: gen.pick(["os", "data", gen.text()]),
      mode: gen.textOr(["read-write", "read-only"]),
    })),
    network_interfaces: gen.list(
      () => ({
        id: gen.text(),
        name: gen.text(),
        network: gen.text(),
        subnet: gen.text(),
        interface_type: gen.text(),
        mac_address: gen.text(),
        ips: gen.list(
          () => ({
            private_ipv4: { address: gen.textOr(["10.0.0.3"]) },
            public_ipv4: { address: gen.textOr(["198.18.0.3"]), id: gen.text(), type: gen.text() },
          }),
          3,
        ),
      }),
      3,
    ),
    host_channel_adapters: [],
    virtualization_features: { nested_virtualization: false },
    instance_template_id: "",
    instance_group_id: "",
    reservation_id: "",
  });

const randomDisk = (gen: Gen) =>
  Disk.safeParse({
    id: gen.textOr(["disk-1"]),
    name: gen.text(),
    type: gen.text(),
    size: gen.textOr(["10GiB", "1TiB", "1024GiB"]),
    location: gen.text(),
    block_size: 4096,
    serial_number: gen.text(),
    created_at: gen.timestamp(),
    updated_at: gen.timestamp(),
    attached_to: gen.list(() => ({ vm_id: gen.text(), attachment_type: gen.text(), mode: gen.text() }), 40),
  });

const randomNetwork = (gen: Gen) =>
  VpcNetwork.safeParse({
    id: gen.textOr(["net-1"]),
    name: gen.text(),
    subnets: gen.list(() => gen.text(), 40),
    gateway: gen.text(),
    cidr: gen.textOr(["10.0.0.0/16"]),
  });

const randomRule = (gen: Gen) =>
  FirewallRule.safeParse({
    id: gen.textOr(["rule-1"]),
    name: gen.text(),
    direction: gen.text(),
    action: gen.text(),
    vpc_network_id: gen.text(),
    state: gen.text(),
    sources: [],
    source_ports: [],
    destinations: [],
    destination_ports: [],
    protocols: [],
  });

interface KindCase {
  plural: string;
  observe(gen: Gen): Observation | undefined;
}

const CASES: KindCase[] = [
  {
    plural: "gpuvms",
    observe: (gen) => {
      const vm = randomVm(gen);
      if (!vm.success) return undefined;
      const desired = { type: gen.pick(["a100.1x", "h100-80gb.8x"]), powerState: "Running" as const, disks: [] };
      return observeVm(desired, summarizeVm(vm.data));
    },
  },
  {
    plural: "gpudisks",
    observe: (gen) => {
      const disk = randomDisk(gen);
      const spec = { size: "10GiB", location: "us-east1-a", type: "persistent-ssd", blockSize: 4096 };
      return disk.success ? observeDisk(spec as Parameters<typeof observeDisk>[0], disk.data) : undefined;
    },
  },
  {
    plural: "gpunetworks",
    observe: (gen) => {
      const network = randomNetwork(gen);
      if (!network.success) return undefined;
      return {
        exists: true,
        id: network.data.id,
        name: network.data.name,
        ready: true,
        upToDate: true,
        atProvider: networkAtProvider(network.data),
      };
    },
  },
  {
    plural: "gpufirewallrules",
    observe: (gen) => {
      const rule = randomRule(gen);
      return rule.success ? observeRule(undefined, rule.data) : undefined;
    },
  },
];

function objectWith(status: ManagedStatusBase): ManagedObject {
  return {
    apiVersion: "gpucloud.dev/v1alpha1",
    kind: "GpuVm",
    metadata: {
      namespace: "default",
      name: "x",
      uid: "u",
      generation: 3,
      resourceVersion: "7",
      finalizers: [],
      annotations: {},
      labels: {},
    },
    spec: {},
    status,
  };
}

/** One pass's draft: what a reconcile copies from the cloud and from annotations into status. */
function randomDraft(gen: Gen, kind: KindCase, mr: ManagedObject): ManagedStatusBase {
  const draft: ManagedStatusBase = { projectId: gen.textOr(["6a3c5d2e-0000-4000-8000-000000000001"]) };
  const observed = kind.observe(gen);
  if (observed?.exists) {
    draft.id = observed.id;
    Object.assign(draft, observed.atProvider);
  }
  const pass = { draft, key: "default/x", mr } as unknown as Pass<ManagedObject["spec"]>;
  const connection = { operation: () => ({ state: "pending" }) } as unknown as CloudConnection<ManagedObject["spec"]>;
  for (let i = gen.int(14); i > 0; i--) {
    const operation = cloudOperation(gen);
    if (operation !== undefined) recordOperation(pass, connection, operation);
  }
  if (kind.plural === "gpuvms") draft.lastResetRequestedAt = fitText(gen.text(), 64);
  if (gen.next() < 0.3) {
    draft.createPending = { cloudName: gen.textOr(["default-x"]), requestedAt: "2026-11-21T12:00:00.000Z" };
  }
  return draft;
}

function randomVerdict(gen: Gen): Verdict {
  const reason = gen.pick(Object.values(REASONS));
  return {
    ready: gen.pick([true, false, undefined]),
    reason,
    message: gen.text(),
    progressing: gen.next() < 0.5,
    stalled: gen.next() < 0.5,
    outcome: { type: "done" },
  };
}

describe("the status builder, fed random cloud answers", () => {
  it.each(CASES)("always renders a status the $plural CRD accepts, with its conditions", (kind) => {
    const schema = crdStatusSchema(kind.plural);
    const validate: ValidateFunction = ajv.compile(schema);
    const gen = new Gen(SEED + kind.plural.length);
    let rejected = 0;
    for (let run = 0; run < RUNS_PER_KIND; run++) {
      const previous = objectWith({});
      const draft = randomDraft(gen, kind, previous);
      const built = buildStatus(previous, draft, randomVerdict(gen), {
        nowMs: Date.parse("2026-11-22T10:00:00Z"),
        fit: (status) => fitStatusInPlace(status, schema),
        rejectedRetryMs: 600_000,
      });
      if (built.verdict.reason === REASONS.StatusRejected) rejected++;
      const valid = validate(draft);
      expect(valid, `seed ${SEED} run ${run}: ${JSON.stringify(validate.errors)}`).toBe(true);
      // A fitted status fits as it is: fitted again, it comes back itself (no copy) and unchanged.
      const copy = structuredClone(draft);
      const again = fitStatus(draft, schema);
      expect(again.value).toBe(draft);
      expect(again.problems).toEqual([]);
      expect(draft).toEqual(copy);
      expect(draft.conditions?.map((c) => c.type)).toEqual(["Ready", "Reconciling", "Stalled", "Synced"]);
      expect(draft.observedGeneration).toBe(3);
    }
    // The generator reaches both sides: answers that fit after shortening, and identities that cannot.
    expect(rejected).toBeGreaterThan(0);
    expect(rejected).toBeLessThan(RUNS_PER_KIND);
  });
});

describe("the status builder, on a pass that changes nothing", () => {
  const verdict: Verdict = {
    ready: true,
    reason: REASONS.Available,
    message: "cloud resource x (id vm-1) is available",
    progressing: false,
    stalled: false,
    outcome: { type: "done" },
  };
  const nowMs = Date.parse("2026-11-22T10:00:00Z");

  it("fits no status that equals the one the object has, and fits one that changed", () => {
    const fits: ManagedStatusBase[] = [];
    const fit = (status: ManagedStatusBase): string[] => {
      fits.push(status);
      return [];
    };
    // The status the last pass wrote (and the API server accepted).
    const written: ManagedStatusBase = { id: "vm-1", state: "STATE_RUNNING" };
    buildStatus(objectWith({}), written, verdict, { nowMs, fit, rejectedRetryMs: 600_000 });
    fits.length = 0;

    const draft = structuredClone(written);
    const again = buildStatus(objectWith(written), draft, verdict, { nowMs: nowMs + 30_000, fit, rejectedRetryMs: 1 });
    expect(again).toMatchObject({ unchanged: true, readyStatus: "True", verdict });
    expect(draft).toEqual(written);
    expect(fits).toEqual([]);

    const drifted = { ...structuredClone(written), state: "STATE_STOPPED" };
    const changed = buildStatus(objectWith(written), drifted, verdict, { nowMs, fit, rejectedRetryMs: 1 });
    expect(changed.unchanged).toBe(false);
    expect(fits).toHaveLength(1);
  });

  it("still turns a changed status with an identity that cannot be fitted into StatusRejected", () => {
    const written: ManagedStatusBase = { id: "vm-1" };
    buildStatus(objectWith({}), written, verdict, { nowMs, fit: () => [], rejectedRetryMs: 1 });
    const draft: ManagedStatusBase = { ...structuredClone(written), id: "x".repeat(100) };
    const problems = ["status.id: 100 characters, the CRD allows 64 (an id is never shortened)"];
    const built = buildStatus(objectWith(written), draft, verdict, {
      nowMs,
      fit: (status) => {
        if (typeof status.id === "string" && status.id.length > 64) {
          delete status.id;
          return problems;
        }
        return [];
      },
      rejectedRetryMs: 600_000,
    });
    expect(built.verdict.reason).toBe(REASONS.StatusRejected);
    expect(built.readyStatus).toBe("False");
    expect(draft.conditions?.find((c) => c.type === "Stalled")?.status).toBe("True");
    expect(draft.lastError).toContain(problems[0]);
  });
});
