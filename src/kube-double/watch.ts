// Watch streams: newline-delimited JSON events with resourceVersion semantics, bookmarks, timeouts and
// 410 Gone as an in-stream ERROR event.
import type { ServerResponse } from "node:http";
import type { Logger } from "pino";
import type { KubeApi } from "./api.ts";
import type { FieldSelector, LabelSelector } from "./selectors.ts";
import { gone } from "./status.ts";
import type { StoredEvent } from "./store.ts";
import { columnDefinitions, tableRow } from "./table.ts";
import { apiVersionOf, type KubeObject, type ResourceType, storageKeyOf } from "./types.ts";

export interface WatchRequest {
  type: ResourceType;
  namespace: string | undefined;
  labelSelector: LabelSelector;
  fieldSelector: FieldSelector;
  resourceVersion: string | undefined;
  timeoutSeconds: number | undefined;
  allowBookmarks: boolean;
  table: { includeObject: string | null } | undefined;
}

export class WatchHub {
  #open = new Set<ServerResponse>();
  #api: KubeApi;
  #bookmarkIntervalMs: number;
  #logger: Logger;
  #gone = 0;

  constructor(api: KubeApi, bookmarkIntervalMs: number, logger: Logger) {
    this.#api = api;
    this.#bookmarkIntervalMs = bookmarkIntervalMs;
    this.#logger = logger;
  }

  get openCount(): number {
    return this.#open.size;
  }

  /** Watches answered 410 Gone (their resourceVersion was older than the history kept). */
  get goneCount(): number {
    return this.#gone;
  }

  /** End every open watch abruptly, as a dropped connection would. */
  dropAll(): void {
    for (const response of this.#open) response.destroy();
    this.#open.clear();
  }

  /** End every open watch cleanly (server shutdown). */
  endAll(): void {
    for (const response of this.#open) response.end();
    this.#open.clear();
  }

  serve(request: WatchRequest, response: ServerResponse): void {
    const { type } = request;
    response.writeHead(200, {
      "Content-Type": "application/json",
      "Cache-Control": "no-cache, private",
      "Transfer-Encoding": "chunked",
    });
    response.flushHeaders();
    let columnsSent = false;
    const write = (eventType: string, object: unknown): void => {
      if (!response.writableEnded && !response.destroyed)
        response.write(`${JSON.stringify({ type: eventType, object })}\n`);
    };
    const sendObject = (eventType: string, object: KubeObject): void => {
      const presented = this.#api.present(type, object);
      if (!request.table) {
        write(eventType, presented);
        return;
      }
      write(eventType, {
        kind: "Table",
        apiVersion: "meta.k8s.io/v1",
        metadata: { resourceVersion: presented.metadata.resourceVersion },
        columnDefinitions: columnsSent ? [] : columnDefinitions(type),
        rows: [tableRow(type, presented, request.table.includeObject)],
      });
      columnsSent = true;
    };
    const bookmark = (): void => {
      write("BOOKMARK", {
        kind: type.kind,
        apiVersion: apiVersionOf(type),
        metadata: { resourceVersion: String(this.#api.store.resourceVersion) },
      });
    };
    const inScope = (object: KubeObject | undefined): boolean =>
      object !== undefined &&
      (request.namespace === undefined || object.metadata.namespace === request.namespace) &&
      // Selectors see the field names of the API watched (events.k8s.io's `regarding`, core's `involvedObject`).
      this.#api.matches(this.#api.present(type, object), request.labelSelector, request.fieldSelector);
    const deliver = (event: StoredEvent): void => {
      if (event.storageKey !== storageKeyOf(type)) return;
      const now = event.type !== "DELETED" && inScope(event.object);
      const before = inScope(event.previous);
      // Objects moving in or out of a selector's scope appear as ADDED / DELETED, like the real server.
      if (now && !before) sendObject("ADDED", event.object);
      else if (now && before) sendObject(event.type, event.object);
      else if (!now && before) sendObject("DELETED", event.type === "DELETED" ? event.object : { ...event.object });
    };

    const rv = request.resourceVersion;
    if (rv === undefined || rv === "" || rv === "0") {
      for (const object of this.#api.store.list(storageKeyOf(type), request.namespace)) {
        if (inScope(object)) sendObject("ADDED", object);
      }
    } else {
      const from = Number(rv);
      const history =
        Number.isInteger(from) && from >= 0 ? this.#api.store.eventsAfter(storageKeyOf(type), from) : "expired";
      if (history === "expired") {
        const message = Number.isInteger(from)
          ? `too old resource version: ${from} (${this.#api.store.oldestServable})`
          : `invalid resourceVersion "${rv}"`;
        write("ERROR", gone(message).toStatus());
        response.end();
        this.#gone++;
        return;
      }
      for (const event of history) deliver(event);
    }

    this.#open.add(response);
    // A failure while rendering one event must not fail the write that caused it: end this watch instead.
    const unsubscribe = this.#api.store.subscribe((event) => {
      try {
        deliver(event);
      } catch (error) {
        this.#logger.error({ err: error }, "watch event could not be sent; ending the watch");
        response.destroy();
      }
    });
    const bookmarkTimer = request.allowBookmarks ? setInterval(bookmark, this.#bookmarkIntervalMs) : undefined;
    const timeout =
      request.timeoutSeconds !== undefined && request.timeoutSeconds > 0
        ? setTimeout(() => {
            if (request.allowBookmarks) bookmark();
            response.end();
          }, request.timeoutSeconds * 1000)
        : undefined;
    const cleanup = (): void => {
      unsubscribe();
      clearInterval(bookmarkTimer);
      clearTimeout(timeout);
      this.#open.delete(response);
    };
    response.on("close", cleanup);
    response.on("finish", cleanup);
  }
}
