// The informer's watch: client-node's ListWatch asks for neither bookmarks nor a server-side timeout, and hands every
// event, malformed or not, to an async handler nobody awaits. This Watch adds allowWatchBookmarks=true and a
// jittered timeoutSeconds, reports activity (the informer's staleness watchdog), drops malformed events and catches
// the handler's promise, and goes silent once its ListWatch is retired. It reads the watch as a Node stream
// (watch-stream.ts), not through WHATWG fetch.
import type { KubeConfig, KubernetesObject } from "@kubernetes/client-node";
import { StreamingWatch } from "./watch-stream.ts";

type WatchCallback = (phase: string, apiObject: unknown, watchObject?: unknown) => void;
type WatchDone = (error: unknown) => void;

/** A Watch that asks for bookmarks and a server-side timeout, reports activity, and goes silent when retired. */
export class BookmarkingWatch extends StreamingWatch {
  retired = false;
  readonly #timeoutSeconds: () => number;
  readonly #onActivity: () => void;

  readonly #onMalformed: (phase: string, error?: unknown) => void;
  readonly #selectors: { fieldSelector?: string; labelSelector?: string };
  /** Sees each well-formed object event first and says the phase its ListWatch is shown (the informer's view). */
  readonly #route: ((phase: string, object: KubernetesObject) => string) | undefined;

  constructor(
    kubeConfig: KubeConfig,
    timeoutSeconds: () => number,
    onActivity: () => void,
    onMalformed: (phase: string, error?: unknown) => void,
    selectors: { fieldSelector?: string; labelSelector?: string },
    route?: (phase: string, object: KubernetesObject) => string,
  ) {
    super(kubeConfig);
    this.#timeoutSeconds = timeoutSeconds;
    this.#onActivity = onActivity;
    this.#onMalformed = onMalformed;
    this.#selectors = selectors;
    this.#route = route;
  }

  override async watch(
    path: string,
    queryParams: Record<string, string | number | boolean | undefined>,
    callback: WatchCallback,
    done: WatchDone,
  ): Promise<AbortController> {
    // A retired ListWatch may still finish a slow list and try to watch: do not let it.
    if (this.retired) return new AbortController();
    const params = {
      ...queryParams,
      allowWatchBookmarks: true,
      timeoutSeconds: this.#timeoutSeconds(),
      ...this.#selectors,
    };
    return super.watch(
      path,
      params,
      (phase, apiObject, watchObject) => {
        if (this.retired) return;
        this.#onActivity();
        // ListWatch's handler is async and never awaited, and it dereferences `object.metadata` blindly: drop
        // malformed events here and catch its promise, so neither becomes an unhandled rejection.
        if (!isWellFormedEvent(phase, apiObject)) {
          this.#onMalformed(phase);
          return;
        }
        try {
          const shown = this.#route === undefined ? phase : this.#route(phase, apiObject as KubernetesObject);
          const pending: unknown = callback(shown, apiObject, watchObject);
          if (pending instanceof Promise) pending.catch((error: unknown) => this.#onMalformed(phase, error));
        } catch (error) {
          this.#onMalformed(phase, error);
        }
      },
      done,
    );
  }
}

/** Object events need an object with metadata; ERROR events carry a Status object. */
function isWellFormedEvent(phase: string, apiObject: unknown): boolean {
  if (typeof apiObject !== "object" || apiObject === null) return false;
  if (phase === "ERROR") return true;
  if (!["ADDED", "MODIFIED", "DELETED", "BOOKMARK"].includes(phase)) return false;
  const metadata = "metadata" in apiObject ? apiObject.metadata : undefined;
  return typeof metadata === "object" && metadata !== null;
}
