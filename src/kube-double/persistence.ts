// `stateFile`: the objects survive a restart. Reading, and the debounced atomic writes, are in
// `util/json-state-file.ts`; this file checks the shape.
import { readJsonStateFile, StateFileError } from "../util/json-state-file.ts";
import type { StoreSnapshot } from "./store.ts";
import { isRecord, type KubeObject } from "./types.ts";

export async function readState(path: string): Promise<StoreSnapshot | undefined> {
  const parsed = await readJsonStateFile(path);
  if (parsed === undefined) return undefined;
  if (!isRecord(parsed) || typeof parsed.resourceVersion !== "number" || !Array.isArray(parsed.objects)) {
    throw new StateFileError(`state file ${path} does not hold { resourceVersion, objects }`);
  }
  const objects = parsed.objects.filter(
    (entry): entry is { storageKey: string; object: KubeObject } =>
      isRecord(entry) &&
      typeof entry.storageKey === "string" &&
      isRecord(entry.object) &&
      isRecord(entry.object.metadata),
  );
  return { resourceVersion: parsed.resourceVersion, objects };
}
