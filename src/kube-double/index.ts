// The Kubernetes API test double: an HTTP server that speaks enough of the Kubernetes REST and watch
// protocol for kubectl and @kubernetes/client-node. For development and tests only.
import { readdir, readFile, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { type Logger, pino } from "pino";
import { parseAllDocuments } from "yaml";
import { JsonStateFileWriter } from "../util/json-state-file.ts";
import { KubeApi } from "./api.ts";
import { isSupportedRule } from "./cel.ts";
import { type FailNextOptions, FaultState, type KubeDoubleFaults } from "./faults.ts";
import { readState } from "./persistence.ts";
import { CRD_TYPE, NAMESPACE_TYPE, ResourceRegistry, rulesOf, typesFromCrd } from "./resources.ts";
import { createRequestHandler } from "./server.ts";
import { ApiError } from "./status.ts";
import { ObjectStore } from "./store.ts";
import { isRecord, storageKeyOf } from "./types.ts";
import { WatchHub } from "./watch.ts";
import { type KubeWrite, newKubeWriteLog } from "./write-log.ts";

export type { FailNextOptions, KubeDoubleFaults } from "./faults.ts";
export type { KubeObject } from "./types.ts";
export type { KubeWrite } from "./write-log.ts";

export interface KubeDoubleOptions {
  /** 0 (default) picks a free port. */
  port?: number;
  host?: string;
  /** A folder of CRD YAML files (`*.yaml`, `*.yml`) to serve. */
  crdDir?: string;
  /** CRD objects to serve, in addition to those of crdDir. */
  crds?: unknown[];
  /** Persist objects here (debounced, atomic) and reload them on start. */
  stateFile?: string;
  logger?: Logger;
  /** How often watches that allow bookmarks get one (default 5000 ms). */
  bookmarkIntervalMs?: number;
  /** How many events the watch history keeps before older resourceVersions expire (default 10000). */
  historyLimit?: number;
  persistDebounceMs?: number;
}

export interface RunningKubeDouble {
  url: string;
  faults: KubeDoubleFaults;
  /** Every write received so far, in order (write-log.ts). */
  writes(): readonly KubeWrite[];
  kubeconfigYaml(): string;
  writeKubeconfig(path: string): Promise<void>;
  close(): Promise<void>;
}

export class CrdLoadError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "CrdLoadError";
  }
}

const DEFAULT_NAMESPACES = ["default", "kube-system", "kube-public", "kube-node-lease"];

async function readCrdDir(directory: string): Promise<{ source: string; crd: unknown }[]> {
  let files: string[];
  try {
    files = (await readdir(directory)).filter((file) => /\.ya?ml$/.test(file)).sort();
  } catch (error) {
    throw new CrdLoadError(`cannot read the CRD folder ${directory}`, { cause: error });
  }
  const found: { source: string; crd: unknown }[] = [];
  for (const file of files) {
    const path = join(directory, file);
    const documents = parseAllDocuments(await readFile(path, "utf8"));
    for (const document of Array.isArray(documents) ? documents : [documents]) {
      if (document.errors.length > 0)
        throw new CrdLoadError(`${path}: ${document.errors[0]?.message ?? "invalid YAML"}`);
      const value: unknown = document.toJSON();
      if (isRecord(value) && value.kind === "CustomResourceDefinition") found.push({ source: path, crd: value });
    }
  }
  return found;
}

function kubeconfigFor(url: string): string {
  return [
    "apiVersion: v1",
    "kind: Config",
    "clusters:",
    "  - name: kube-double",
    "    cluster:",
    `      server: ${url}`,
    "      insecure-skip-tls-verify: true",
    "users:",
    "  - name: kube-double",
    "    user:",
    "      token: kube-double-token",
    "contexts:",
    "  - name: kube-double",
    "    context:",
    "      cluster: kube-double",
    "      user: kube-double",
    "      namespace: default",
    "current-context: kube-double",
    "",
  ].join("\n");
}

/** Objects from the state file, the default namespaces, then the CRDs of crdDir and options.crds. */
async function loadInitialObjects(api: KubeApi, options: KubeDoubleOptions, logger: Logger): Promise<number> {
  const { store, registry } = api;
  const saved = options.stateFile === undefined ? undefined : await readState(options.stateFile);
  if (saved) {
    store.restore(saved);
    for (const crd of store.list(storageKeyOf(CRD_TYPE)))
      registry.setCrd(crd.metadata.name ?? "", typesFromCrd(crd).types);
  }
  for (const name of DEFAULT_NAMESPACES) {
    if (!store.get(storageKeyOf(NAMESPACE_TYPE), undefined, name)) {
      api.create(
        NAMESPACE_TYPE,
        undefined,
        { metadata: { name } },
        { strict: false, fieldManager: "kube-double", dryRun: false, subresource: undefined },
      );
    }
  }
  const crds = [
    ...(options.crdDir === undefined ? [] : await readCrdDir(options.crdDir)),
    ...(options.crds ?? []).map((crd, index) => ({ source: `options.crds[${index}]`, crd })),
  ];
  for (const { source, crd } of crds) {
    try {
      const installed = api.installCrd(crd);
      for (const type of typesFromCrd(installed).types) {
        const unsupported = rulesOf(type.schema).filter((rule) => !isSupportedRule(rule));
        if (unsupported.length > 0)
          logger.warn(
            { source, kind: type.kind, unsupported },
            "CEL rules outside the supported subset are not enforced",
          );
      }
    } catch (error) {
      throw new CrdLoadError(
        `${source}: ${error instanceof ApiError || error instanceof Error ? error.message : String(error)}`,
        { cause: error },
      );
    }
  }
  return crds.length;
}

export async function startKubeDouble(options: KubeDoubleOptions = {}): Promise<RunningKubeDouble> {
  const logger = options.logger ?? pino({ level: "silent" });
  const registry = new ResourceRegistry();
  let persister: JsonStateFileWriter | undefined;
  const store = new ObjectStore({
    historyLimit: options.historyLimit ?? 10_000,
    onChange: () => persister?.markDirty(),
  });
  const api = new KubeApi(registry, store, logger);

  const crdCount = await loadInitialObjects(api, options, logger);
  if (options.stateFile !== undefined) {
    const path = options.stateFile;
    persister = new JsonStateFileWriter({
      path,
      snapshot: () => store.snapshot(),
      debounceMs: options.persistDebounceMs ?? 200,
      onError: (error) => logger.error({ err: error, path }, "could not write the state file"),
    });
  }

  const watches = new WatchHub(api, options.bookmarkIntervalMs ?? 5000, logger);
  const faultState = new FaultState();
  const faults: KubeDoubleFaults = {
    dropWatches: () => watches.dropAll(),
    endWatches: () => watches.endAll(),
    compact: () => store.compact(),
    failNext: (count: number, status: number, failOptions?: FailNextOptions) =>
      faultState.addFailure(count, status, failOptions),
    setLatency: (ms: number) => {
      faultState.latencyMs = ms;
    },
    injected: () => faultState.injected(),
    watchesGone: () => watches.goneCount,
  };
  const writes = newKubeWriteLog();
  const server: Server = createServer(
    createRequestHandler({ api, watches, faults: faultState, adminActions: faults, logger, writes }),
  );
  const host = options.host ?? "127.0.0.1";
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const url = `http://${host.includes(":") ? `[${host}]` : host}:${address.port}`;
  logger.info({ url, crds: crdCount }, "Kubernetes API test double listening");
  let closing: Promise<void> | undefined;
  return {
    url,
    faults,
    writes: () => writes.entries(),
    kubeconfigYaml: () => kubeconfigFor(url),
    writeKubeconfig: (path: string) => writeFile(path, kubeconfigFor(url), { mode: 0o600 }),
    close: () => {
      closing ??= (async () => {
        api.dispose();
        watches.endAll();
        server.closeAllConnections();
        await new Promise<void>((resolve) => server.close(() => resolve()));
        await persister?.flush();
      })();
      return closing;
    },
  };
}
