// A resource this object holds that no read shows is not gone yet: reads may lag a create or a change (a cloud
// may show a new VM only after tens of seconds), and acting on an absence that is only a slow read creates a
// second resource or lets the first one leak. It counts as gone once every read has missed it for
// `goneConfirmMs`; until then the object says what it waits for.

import { REASONS } from "../../api/common.ts";
import type { ManagedSpecBase } from "../core/object-model.ts";
import { after, type Verdict, verdict } from "../core/verdict.ts";
import type { Pass } from "./pass.ts";

/** How often a missing resource is looked for again while its absence is being confirmed. */
const LOOK_AGAIN_MS = 10_000;

/**
 * Whether the resource `what` (an id, or a name a create may have made) has been missing long enough to count as
 * gone; otherwise the verdict to wait with. The first miss starts the clock (this process's memory: a restart
 * starts it again, which only waits longer).
 */
export function confirmAbsence<Spec extends ManagedSpecBase>(
  pass: Pass<Spec>,
  what: string,
  doing: string,
): { gone: true } | { gone: false; waiting: Verdict } {
  const { services, key } = pass;
  const now = services.now();
  const known = services.missingSince.get(key);
  const since = known?.id === what ? known.sinceMs : now;
  if (known?.id !== what) services.missingSince.set(key, { id: what, sinceMs: now });
  const remaining = since + services.timing.goneConfirmMs - now;
  if (remaining <= 0) {
    services.missingSince.delete(key);
    return { gone: true };
  }
  const message =
    `cloud resource ${what} is not found since ${new Date(since).toISOString()}; ${doing} only once it stays ` +
    `unseen until ${new Date(since + services.timing.goneConfirmMs).toISOString()} (reads may lag behind the cloud)`;
  const waiting = verdict(REASONS.WaitingForOperation, message, after(Math.min(remaining, LOOK_AGAIN_MS)), {
    progressing: true,
    event: "Warning",
  });
  return { gone: false, waiting };
}

/** The resource showed up (or the object let it go): no absence to confirm any more. */
export function resourceSeen<Spec extends ManagedSpecBase>(pass: Pass<Spec>): void {
  pass.services.missingSince.delete(pass.key);
}
