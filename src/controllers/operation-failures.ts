// What a FAILED cloud operation means for the object: a failed create with `already_exists` adopts by name,
// `out_of_stock` walks to the next location, anything else stalls OperationFailed with the cloud's code.
import { REASON, type Verdict } from "./classify.ts";
import { adopt, nextLocation } from "./creation.ts";
import type { ManagedSpecBase } from "./external.ts";
import type { OperationFailure } from "./operation-tracking.ts";
import { after, type CloudConnection, DONE, type Pass, verdict } from "./reconcile-pass.ts";

export async function handleFailedOperation<Spec extends ManagedSpecBase>(
  pass: Pass<Spec>,
  connection: CloudConnection<Spec>,
  { code, message }: OperationFailure,
): Promise<Verdict> {
  if (pass.draft.operation?.name === "CREATE") {
    delete pass.draft.createPending;
    delete pass.draft.id;
    if (code === "already_exists") {
      const id = await connection.external.findByName(pass.cloudName, pass.signal);
      if (id !== undefined) return adopt(pass, id);
      return verdict(REASON.NameConflict, message, after(pass.services.timing.shortMs), { progressing: true });
    }
    if (code === "out_of_stock") return nextLocation(pass, message);
  }
  if (code === "out_of_stock") {
    return verdict(
      REASON.CapacityUnavailable,
      message,
      { type: "retry", error: new Error(message) },
      {
        stalled: true,
        event: "Warning",
      },
    );
  }
  return verdict(REASON.OperationFailed, message, DONE, { stalled: true, event: "Warning" });
}
