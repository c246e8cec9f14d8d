// How often each object is resynced: the controller's period (--sync-period), or the object's own
// gpucloud.dev/sync-period annotation, raised to a floor so that a tenant cannot make the operator list its cloud
// account more often than that. A bad or raised value is logged once per object and value.
import type { KubernetesObject } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { MIN_SYNC_PERIOD_MS, SYNC_PERIOD_ANNOTATION } from "../api/common.ts";
import { keyOf, type ReconcileRequest } from "./controller.ts";
import { formatDuration, syncPeriodOf } from "./time.ts";

export class SyncPeriods {
  readonly #floorMs: number;
  readonly #logger: Logger;
  /** `namespace/name=value` of the annotations already reported. */
  readonly #reported = new Set<string>();

  constructor(options: { logger: Logger; floorMs?: number }) {
    this.#logger = options.logger;
    this.#floorMs = options.floorMs ?? MIN_SYNC_PERIOD_MS;
  }

  /** The resync period of the object (undefined: gone, no more polling); `fallbackMs` without an annotation. */
  periodOf(object: KubernetesObject | undefined, request: ReconcileRequest, fallbackMs: number): number | undefined {
    if (object === undefined) return undefined;
    const annotation = object.metadata?.annotations?.[SYNC_PERIOD_ANNOTATION];
    if (annotation === undefined) return fallbackMs;
    const period = syncPeriodOf(annotation, this.#floorMs);
    if ("ms" in period && period.raisedFrom === undefined) return period.ms;
    // Reported once per object and value (the reconciler also records an Event when it raises one).
    const key = `${keyOf(request.namespace, request.name)}=${annotation}`;
    if (!this.#reported.has(key)) {
      this.#reported.add(key);
      const where = { namespace: request.namespace, name: request.name, annotation };
      if ("error" in period)
        this.#logger.warn({ ...where, err: period.error }, `ignoring invalid ${SYNC_PERIOD_ANNOTATION}`);
      else
        this.#logger.warn(
          { ...where, usedMs: period.ms },
          `${SYNC_PERIOD_ANNOTATION} below the floor of ${formatDuration(this.#floorMs)}: raised to it`,
        );
    }
    return "ms" in period ? period.ms : fallbackMs;
  }
}
