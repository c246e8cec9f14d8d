// A watch request read as a Node stream. client-node's Watch sends it with WHATWG fetch, turns the web stream
// into a Node stream, splits it with readline and re-arms a timer (clearTimeout + setTimeout) on every chunk, work
// repeated for each of the several events every object brings. This one keeps Watch's
// contract, which client-node's ListWatch relies on: `done` once (null when the server ended the watch, a
// TimeoutError after `requestTimeoutMs` without data, the error otherwise, with `statusCode` for an HTTP
// status), an AbortController that ends it, events as (type, object, whole event), lines that are not JSON skipped.
import { STATUS_CODES } from "node:http";
import { HttpMethod, RequestContext } from "@kubernetes/client-node/dist/gen/http/http.js";
import { Watch } from "@kubernetes/client-node/dist/watch.js";
import { type Dispatcher, getGlobalDispatcher, request } from "undici";

type WatchCallback = (phase: string, apiObject: unknown, watchObject?: unknown) => void;
type WatchDone = (error: unknown) => void;

/** No data (not even a bookmark) for this long ends the watch with a TimeoutError, as client-node's does. */
export const WATCH_INACTIVITY_TIMEOUT_MS = 30_000;

export class StreamingWatch extends Watch {
  /** Inactivity timeout of this watch's requests (tests shorten it). */
  inactivityTimeoutMs = WATCH_INACTIVITY_TIMEOUT_MS;

  override async watch(
    path: string,
    queryParams: Record<string, string | number | boolean | undefined>,
    callback: WatchCallback,
    done: WatchDone,
  ): Promise<AbortController> {
    const cluster = this.config.getCurrentCluster();
    if (!cluster) throw new Error("No currently active cluster");
    const url = new URL(cluster.server + path);
    url.searchParams.set("watch", "true");
    for (const [key, value] of Object.entries(queryParams)) {
      if (value !== undefined) url.searchParams.set(key, String(value));
    }
    const context = new RequestContext(url.toString(), HttpMethod.GET);
    await this.config.applySecurityAuthentication(context);

    const controller = new AbortController();
    const timeoutMs = this.inactivityTimeoutMs;
    let lastDataAt = performance.now();
    let timedOut = false;
    let finished = false;
    // One timer per timeout period, not one per chunk: it looks at when data last came and sleeps the rest.
    let timer: NodeJS.Timeout | undefined;
    const arm = (delayMs: number): void => {
      timer = setTimeout(() => {
        const idleMs = performance.now() - lastDataAt;
        if (idleMs < timeoutMs) return arm(timeoutMs - idleMs);
        timedOut = true;
        controller.abort(new DOMException("The operation was aborted due to timeout", "TimeoutError"));
      }, delayMs);
      timer.unref();
    };
    const finish = (error: unknown): void => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      controller.abort();
      done(error && timedOut ? new DOMException("The operation was aborted due to timeout", "TimeoutError") : error);
    };
    arm(timeoutMs);
    try {
      const answer = await request(url, {
        method: "GET",
        headers: context.getHeaders(),
        dispatcher: (context.getDispatcher() as Dispatcher | undefined) ?? getGlobalDispatcher(),
        signal: controller.signal,
      });
      if (answer.statusCode !== 200) {
        answer.body.destroy();
        const error = new Error(STATUS_CODES[answer.statusCode] ?? "Internal Server Error") as Error & {
          statusCode: number;
        };
        error.statusCode = answer.statusCode;
        throw error;
      }
      lastDataAt = performance.now();
      const body = answer.body;
      body.setEncoding("utf8");
      let pending = "";
      body.on("data", (text: string) => {
        lastDataAt = performance.now();
        pending += text;
        let start = 0;
        for (let end = pending.indexOf("\n"); end !== -1; end = pending.indexOf("\n", start)) {
          const line = pending.slice(start, end);
          start = end + 1;
          deliver(line, callback);
        }
        pending = start === 0 ? pending : pending.slice(start);
      });
      body.on("error", finish);
      body.on("end", () => {
        if (pending !== "") deliver(pending, callback);
        finish(null);
      });
      body.on("close", () => finish(null));
    } catch (error) {
      finish(error);
    }
    return controller;
  }
}

/** One line of the stream: a JSON watch event, or skipped (blank lines, half a line of a broken stream). */
function deliver(line: string, callback: WatchCallback): void {
  if (line.trim() === "") return;
  let event: { type?: unknown; object?: unknown };
  try {
    event = JSON.parse(line) as { type?: unknown; object?: unknown };
  } catch {
    return;
  }
  if (typeof event !== "object" || event === null) return;
  try {
    callback(String(event.type), event.object, event);
  } catch {
    // As client-node's Watch: a handler's error does not end the stream (the informer's handlers log their own).
  }
}
