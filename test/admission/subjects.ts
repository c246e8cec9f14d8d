// What the admission tests reserve for: GpuVms of namespace `team`, and the price of an a40.1x create.
import type { Need, Subject } from "../../src/admission/ledger.ts";
import { DEFAULT_PRICES } from "../../src/admission/prices.ts";

const A40 = DEFAULT_PRICES.vm("a40.1x");
if (A40 === undefined) throw new Error("a40.1x has no price");
/** Creating an a40.1x: $1.10/h, one a40 GPU. */
export const CREATE_A40: Need = { ...A40, purpose: "Create" };

/** A GpuVm `name` of namespace `team` with uid `uid-<name>`. */
export const subject = (name: string, priority = 0, labels: Record<string, string> = {}): Subject => ({
  kind: "GpuVm",
  namespace: "team",
  name,
  uid: `uid-${name}`,
  labels,
  priority,
});
