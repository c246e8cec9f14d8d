// How informer events become keys in a controller's queue: an event of one of its own objects enqueues that object
// (in the lane its change deserves, not at all when it only echoes the controller's own write), an event of a
// watched resource enqueues the keys the registration maps it to.
import type { KubernetesObject } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { type Controller, keyOf } from "./controller.ts";
import type { ControllerRegistration, WatchMapping } from "./controller-registration.ts";
import type { ObjectInformer } from "./informer.ts";
import type { InformerEvent } from "./informer-cache.ts";
import type { Priority } from "./workqueue.ts";

/** Enqueues the controller's own object on each of its events, unless `isEcho` says it echoes its own write. */
export function enqueueOwnEvents(
  informer: ObjectInformer,
  controller: Controller,
  isEcho: ControllerRegistration["isEcho"],
): void {
  informer.on((event) => {
    const name = event.object.metadata?.name;
    if (!name) return;
    const key = keyOf(event.object.metadata?.namespace, name);
    const version = event.object.metadata?.resourceVersion;
    const echo = event.type === "update" && version !== undefined ? isEcho?.(key, version) : false;
    if (echo === true) return;
    if (echo === false || echo === undefined) {
      controller.enqueue(key, priorityOf(event));
      return;
    }
    echo.then(
      (isOwnEcho) => {
        if (!isOwnEcho) controller.enqueue(key, priorityOf(event));
      },
      () => controller.enqueue(key, priorityOf(event)),
    );
  });
}

/** Enqueues the keys `watch.mapToKeys` gives for each event of a watched object; a mapping that throws is logged. */
export function enqueueWatchedEvents(
  informer: ObjectInformer,
  controller: Controller,
  watch: WatchMapping,
  logger: Logger,
): void {
  informer.on(({ object }) => {
    let keys: string[];
    try {
      keys = watch.mapToKeys(object);
    } catch (error) {
      logger.error({ err: error, controller: controller.name }, "mapToKeys threw; no keys enqueued");
      return;
    }
    for (const key of keys) controller.enqueue(key);
  });
}

/**
 * The lane an event of a controller's own object goes to: a change somebody asked for (spec, deletion,
 * annotations, labels) is `high`, so it never waits behind a backlog of new objects or resyncs; anything else
 * (a new object, our own status writes coming back) is `normal`.
 */
export function priorityOf(event: InformerEvent<KubernetesObject>): Priority {
  const { object, previous } = event;
  if (event.type !== "update" || previous === undefined) return "normal";
  const now = object.metadata;
  const before = previous.metadata;
  if (now?.generation !== before?.generation) return "high";
  if (now?.deletionTimestamp !== before?.deletionTimestamp) return "high";
  if (!sameStrings(now?.annotations, before?.annotations) || !sameStrings(now?.labels, before?.labels)) return "high";
  return "normal";
}

function sameStrings(a: Record<string, string> | undefined, b: Record<string, string> | undefined): boolean {
  const left = a ?? {};
  const right = b ?? {};
  const keys = Object.keys(left);
  return keys.length === Object.keys(right).length && keys.every((key) => left[key] === right[key]);
}
