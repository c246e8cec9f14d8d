// Small helpers over the Kubernetes API for the Cluster API tests: list items, a field by path, creates and
// merge patches that must succeed, and a Machine's bootstrap data.
import { type KubeTarget, kubeExpect } from "../../src/control-plane/http.ts";
import { eventually } from "../../src/util/eventually.ts";
import { isRecord } from "../../src/util/is-record.ts";

export function items(response: { json: unknown }): Record<string, unknown>[] {
  return isRecord(response.json) && Array.isArray(response.json.items) ? response.json.items.filter(isRecord) : [];
}

/** The value at a path of nested objects, undefined where the path leaves them. */
export function field(object: unknown, ...path: string[]): unknown {
  let value = object;
  for (const key of path) value = isRecord(value) ? value[key] : undefined;
  return value;
}

export async function list(target: KubeTarget, path: string): Promise<Record<string, unknown>[]> {
  return items(await kubeExpect(target, { path }, [200]));
}

export async function get(target: KubeTarget, path: string): Promise<Record<string, unknown>> {
  const found = (await kubeExpect(target, { path }, [200])).json;
  return isRecord(found) ? found : {};
}

export async function mergePatch(target: KubeTarget, path: string, body: unknown): Promise<void> {
  await kubeExpect(target, { method: "PATCH", path, body, contentType: "application/merge-patch+json" }, [200]);
}

export async function create(target: KubeTarget, path: string, body: unknown): Promise<void> {
  await kubeExpect(target, { method: "POST", path, body }, [201]);
}

/** The `value` of a bootstrap data Secret (a cloud-config), decoded. */
export function bootstrapDataOf(secret: Record<string, unknown>): string {
  const value = field(secret, "data", "value");
  return typeof value === "string" ? Buffer.from(value, "base64").toString("utf8") : "";
}

/** Waits (up to 3 minutes) for exactly `count` Machines at `machinesPath`, each naming its bootstrap data Secret. */
export async function machinesWithBootstrapData(
  target: KubeTarget,
  machinesPath: string,
  count: number,
): Promise<Record<string, unknown>[]> {
  return eventually(
    `${count} Machines with bootstrap data`,
    async () => {
      const found = await list(target, machinesPath);
      const withData = found.filter(
        (machine) => typeof field(machine, "spec", "bootstrap", "dataSecretName") === "string",
      );
      return withData.length === count && found.length === count ? found : undefined;
    },
    180_000,
  );
}

/** Waits (up to 3 minutes) for `count` Machines at `machinesPath` Running with a nodeRef; all of them. */
export async function machinesRunning(
  target: KubeTarget,
  machinesPath: string,
  count: number,
): Promise<Record<string, unknown>[]> {
  return eventually(
    `${count} Machines Running with a nodeRef`,
    async () => {
      const found = await list(target, machinesPath);
      const done = found.filter(
        (m) => field(m, "status", "phase") === "Running" && field(m, "status", "nodeRef", "name"),
      );
      return done.length === count ? found : undefined;
    },
    180_000,
  );
}
