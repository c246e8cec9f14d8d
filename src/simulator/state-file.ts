// `--state-file`: the state is written atomically (temp file + rename), debounced, and read back at start.
// Reading and writing are in `util/json-state-file.ts`; this file checks the shape.
import { readJsonStateFile, StateFileError } from "../util/json-state-file.ts";
import type { SimState } from "./state.ts";

/** Read a state file; `undefined` when it does not exist yet. */
export async function readStateFile(path: string): Promise<SimState | undefined> {
  const parsed = await readJsonStateFile(path);
  if (parsed === undefined) return undefined;
  const candidate = parsed as Partial<SimState> | null;
  const arrays = [
    "organizations",
    "projects",
    "users",
    "apiKeys",
    "vms",
    "disks",
    "networks",
    "firewallRules",
    "operations",
  ] as const;
  if (
    candidate === null ||
    typeof candidate !== "object" ||
    candidate.version !== 1 ||
    arrays.some((key) => !Array.isArray(candidate[key])) ||
    typeof candidate.capacity !== "object" ||
    typeof candidate.usage !== "object" ||
    typeof candidate.addressCounter !== "number" ||
    (candidate.profile !== undefined && typeof candidate.profile !== "string") ||
    (candidate.sessions !== undefined &&
      (typeof candidate.sessions?.access !== "object" || typeof candidate.sessions?.refresh !== "object"))
  ) {
    throw new StateFileError(`state file ${path} is not a simulator state (version 1)`);
  }
  return candidate as SimState;
}
