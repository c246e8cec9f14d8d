// The bench's side of the Kubernetes API (the test double): plain HTTP, no client library, so that what the
// driver costs never shows in the operator's figures. Creates manifests with bounded concurrency and follows
// every managed object through a watch: when it was created, each write to it, when it first became Ready.
import { GROUP, VERSION } from "../../src/api/common.ts";

export const KINDS = [
  { kind: "GpuNetwork", plural: "gpunetworks" },
  { kind: "GpuDisk", plural: "gpudisks" },
  { kind: "GpuFirewallRule", plural: "gpufirewallrules" },
  { kind: "GpuVm", plural: "gpuvms" },
] as const;
export type KindName = (typeof KINDS)[number]["kind"];

const TOKEN = "kube-double-token";
export const SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGJlbmNobWFya2tleWZvcnRoZW9wZXJhdG9y bench@example";

export interface Manifest {
  apiVersion: string;
  kind: KindName;
  metadata: { name: string; namespace: string; annotations?: Record<string, string> };
  spec: Record<string, unknown>;
}

export class KubeHttp {
  readonly url: string;

  constructor(url: string) {
    this.url = url.replace(/\/+$/, "");
  }

  async request(method: string, path: string, body?: unknown, contentType = "application/json"): Promise<Response> {
    return fetch(`${this.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${TOKEN}`,
        accept: "application/json",
        ...(body === undefined ? {} : { "content-type": contentType }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  }

  async json(method: string, path: string, body?: unknown, contentType?: string): Promise<unknown> {
    const response = await this.request(method, path, body, contentType);
    const text = await response.text();
    if (!response.ok) throw new Error(`${method} ${path}: HTTP ${response.status} ${text.slice(0, 300)}`);
    return JSON.parse(text) as unknown;
  }

  async ensureNamespace(name: string): Promise<void> {
    const response = await this.request("POST", "/api/v1/namespaces", {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name },
    });
    await response.text();
    if (!response.ok && response.status !== 409) throw new Error(`namespace ${name}: HTTP ${response.status}`);
  }

  async createCredentials(
    namespace: string,
    name: string,
    cloud: { apiKey: string; projectId: string; url: string },
  ): Promise<void> {
    await this.json("POST", `/api/v1/namespaces/${namespace}/secrets`, {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name, namespace },
      stringData: { apiKey: cloud.apiKey, projectId: cloud.projectId, apiUrl: cloud.url },
    });
  }

  pathOf(plural: string, namespace: string, name?: string): string {
    const base = `/apis/${GROUP}/${VERSION}/namespaces/${namespace}/${plural}`;
    return name === undefined ? base : `${base}/${name}`;
  }

  /** Create every manifest, `concurrency` at a time; resolves with the time each create was answered. */
  async createAll(manifests: readonly Manifest[], concurrency: number, onCreated?: (m: Manifest) => void) {
    let next = 0;
    const worker = async (): Promise<void> => {
      for (let index = next++; index < manifests.length; index = next++) {
        const manifest = manifests[index] as Manifest;
        const plural = pluralOf(manifest.kind);
        await this.json("POST", this.pathOf(plural, manifest.metadata.namespace), manifest);
        onCreated?.(manifest);
      }
    };
    await Promise.all(Array.from({ length: concurrency }, () => worker()));
  }

  async mergePatch(plural: string, namespace: string, name: string, patch: unknown): Promise<void> {
    await this.json("PATCH", this.pathOf(plural, namespace, name), patch, "application/merge-patch+json");
  }
}

export function pluralOf(kind: KindName): string {
  return KINDS.find((k) => k.kind === kind)?.plural ?? "";
}

export interface ObjectTrack {
  kind: KindName;
  name: string;
  createdAt?: number;
  /** Writes seen after the create (status, finalizer, metadata), until Ready. */
  writesToReady: number;
  writes: number;
  readyAt?: number;
  /** status.id: the cloud resource. */
  id?: string;
}

interface WatchEvent {
  type: string;
  object: {
    metadata?: { name?: string; resourceVersion?: string };
    status?: { id?: string; conditions?: { type: string; status: string }[] };
  };
}

/** Follows the managed objects of one namespace through watches (one per kind). */
export class ObjectWatch {
  readonly objects = new Map<string, ObjectTrack>();
  readonly #kube: KubeHttp;
  readonly #namespace: string;
  readonly #abort = new AbortController();
  #readyCount = 0;
  #waiters: Array<{ count: number; resolve: () => void }> = [];
  #running: Promise<void>[] = [];

  constructor(kube: KubeHttp, namespace: string) {
    this.#kube = kube;
    this.#namespace = namespace;
  }

  get readyCount(): number {
    return this.#readyCount;
  }

  async start(): Promise<void> {
    for (const { kind, plural } of KINDS) {
      const list = (await this.#kube.json("GET", this.#kube.pathOf(plural, this.#namespace))) as {
        metadata: { resourceVersion: string };
        items: WatchEvent["object"][];
      };
      for (const item of list.items) this.#apply(kind, { type: "ADDED", object: item });
      this.#running.push(this.#follow(kind, plural, list.metadata.resourceVersion));
    }
  }

  /** Resolves once `count` objects are Ready, or rejects after `timeoutMs`. */
  waitForReady(count: number, timeoutMs: number): Promise<boolean> {
    if (this.#readyCount >= count) return Promise.resolve(true);
    return new Promise((resolve) => {
      const entry = { count, resolve: () => resolve(true) };
      this.#waiters.push(entry);
      setTimeout(() => {
        this.#waiters = this.#waiters.filter((w) => w !== entry);
        resolve(false);
      }, timeoutMs).unref();
    });
  }

  stop(): void {
    this.#abort.abort();
  }

  async #follow(kind: KindName, plural: string, fromVersion: string): Promise<void> {
    let version = fromVersion;
    while (!this.#abort.signal.aborted) {
      try {
        const response = await fetch(
          `${this.#kube.url}${this.#kube.pathOf(plural, this.#namespace)}?watch=true&allowWatchBookmarks=true&resourceVersion=${version}`,
          { headers: { authorization: `Bearer ${TOKEN}` }, signal: this.#abort.signal },
        );
        if (response.body === null) throw new Error("watch without body");
        const decoder = new TextDecoder();
        let buffered = "";
        for await (const chunk of response.body) {
          buffered += decoder.decode(chunk as Uint8Array, { stream: true });
          let newline = buffered.indexOf("\n");
          while (newline >= 0) {
            const line = buffered.slice(0, newline).trim();
            buffered = buffered.slice(newline + 1);
            newline = buffered.indexOf("\n");
            if (line === "") continue;
            const event = JSON.parse(line) as WatchEvent;
            version = event.object.metadata?.resourceVersion ?? version;
            this.#apply(kind, event);
          }
        }
      } catch (error) {
        if (this.#abort.signal.aborted) return;
        process.stderr.write(`watch of ${plural} ended: ${String(error)}; resuming\n`);
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }
  }

  #apply(kind: KindName, event: WatchEvent): void {
    const name = event.object.metadata?.name;
    if (name === undefined || (event.type !== "ADDED" && event.type !== "MODIFIED")) return;
    const key = `${kind}/${name}`;
    let track = this.objects.get(key);
    if (track === undefined) {
      track = { kind, name, createdAt: Date.now(), writesToReady: 0, writes: 0 };
      this.objects.set(key, track);
    } else {
      track.writes++;
      if (track.readyAt === undefined) track.writesToReady++;
    }
    if (event.object.status?.id !== undefined) track.id = event.object.status.id;
    const ready = event.object.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false;
    if (ready && track.readyAt === undefined) {
      track.readyAt = Date.now();
      this.#readyCount++;
      const due = this.#waiters.filter((w) => w.count <= this.#readyCount);
      this.#waiters = this.#waiters.filter((w) => w.count > this.#readyCount);
      for (const waiter of due) waiter.resolve();
    }
  }
}

/** The manifests of a burst: mostly VMs, some disks, networks and firewall rules (rules need their network). */
export function mixedManifests(count: number, namespace: string, secretName: string): Manifest[] {
  const networks = Math.max(1, Math.round(count * 0.02));
  const rules = Math.round(count * 0.03);
  const disks = Math.round(count * 0.1);
  const vms = Math.max(0, count - networks - rules - disks);
  const apiVersion = `${GROUP}/${VERSION}`;
  const common = { credentialsRef: { name: secretName } };
  const pad = (i: number): string => String(i).padStart(5, "0");
  const manifests: Manifest[] = [];
  for (let i = 0; i < networks; i++) {
    manifests.push({
      apiVersion,
      kind: "GpuNetwork",
      metadata: { name: `net-${pad(i)}`, namespace },
      spec: { ...common, cidr: `10.${(i % 200) + 20}.0.0/16` },
    });
  }
  for (let i = 0; i < rules; i++) {
    manifests.push({
      apiVersion,
      kind: "GpuFirewallRule",
      metadata: { name: `rule-${pad(i)}`, namespace },
      spec: {
        ...common,
        networkRef: { name: `net-${pad(i % networks)}` },
        direction: "ingress",
        action: "allow",
        protocols: ["tcp"],
        sources: [{ cidr: "0.0.0.0/0" }],
        destinationPorts: [String(1000 + i)],
      },
    });
  }
  for (let i = 0; i < disks; i++) {
    manifests.push({
      apiVersion,
      kind: "GpuDisk",
      metadata: { name: `disk-${pad(i)}`, namespace },
      spec: { ...common, size: "100GiB", location: "us-east1-a", type: "persistent-ssd" },
    });
  }
  for (let i = 0; i < vms; i++) manifests.push(vmManifest(`vm-${pad(i)}`, namespace, secretName));
  return manifests;
}

export function vmManifest(name: string, namespace: string, secretName: string, id?: string): Manifest {
  return {
    apiVersion: `${GROUP}/${VERSION}`,
    kind: "GpuVm",
    metadata: { name, namespace },
    spec:
      id === undefined
        ? {
            credentialsRef: { name: secretName },
            type: "a40.1x",
            locations: ["us-east1-a", "us-southcentral1-a", "eu-iceland1-a"],
            sshPublicKey: SSH_KEY,
          }
        : { credentialsRef: { name: secretName }, type: "a40.1x", id },
  };
}
