// Fencing: a write leaves this process only while the process may act (it holds its shard's Lease with margin,
// and the pass that sends it was not cancelled). The check is made at the last moment before the bytes leave:
// inside the HTTP client, as the request is written to its socket, not when the caller decided to send it — a
// process frozen (SIGSTOP, a long pause) between the two must not act on a decision it made while it led.
// The runtime implements the Fence (it knows the Lease and the pass); the cloud transport and the Kubernetes
// client apply it, each through its undici dispatcher.

/** Decides whether a write may leave now. */
export interface Fence {
  /**
   * Called as a write is handed to the HTTP client, in the caller's async context (so the guard can tell which
   * pass sends it). Answers the check to make right before the write's bytes leave: undefined when it may leave,
   * else why not.
   */
  writeGuard(): () => string | undefined;
}

/** A write refused by the fence: it was never sent. */
export class FencedError extends Error {
  override name = "FencedError";
}

/** Whether `error`, or an error it wraps (`cause`, a few levels deep), is a fence's refusal. */
export function isFenced(error: unknown): boolean {
  let current: unknown = error;
  for (let depth = 0; depth < 5 && current instanceof Error; depth++) {
    if (current instanceof FencedError) return true;
    current = current.cause;
  }
  return false;
}

/** Reads change nothing: only other methods are fenced. */
export function isWriteMethod(method: string | undefined): boolean {
  const upper = (method ?? "GET").toUpperCase();
  return upper !== "GET" && upper !== "HEAD" && upper !== "OPTIONS";
}

interface StartableHandler {
  onRequestStart?(controller: { abort(reason: Error): void }, context: unknown): void;
}

/**
 * An undici interceptor (`dispatcher.compose(fencingInterceptor(fence))`) that refuses a write when `fence`
 * says no at `onRequestStart`: undici calls it synchronously right before it writes the request to the socket,
 * and an abort there sends nothing. Reads pass untouched. Typed structurally: util imports no package.
 */
export function fencingInterceptor(fence: Fence) {
  return <Options extends { method?: string }, Handler extends object>(
    dispatch: (options: Options, handler: Handler) => boolean,
  ) =>
    (options: Options, handler: Handler): boolean => {
      if (!isWriteMethod(options.method)) return dispatch(options, handler);
      const refusal = fence.writeGuard();
      const start = (handler as StartableHandler).onRequestStart;
      if (typeof start !== "function") {
        // A handler of undici's older API: checked now, as it is dispatched.
        const now = refusal();
        if (now !== undefined) throw new FencedError(`${options.method} not sent: ${now}`);
        return dispatch(options, handler);
      }
      const guarded = new Proxy(handler, {
        get(target, property) {
          if (property === "onRequestStart") {
            return (controller: { abort(reason: Error): void }, context: unknown): void => {
              const why = refusal();
              if (why !== undefined) {
                controller.abort(new FencedError(`${options.method} not sent: ${why}`));
                return;
              }
              start.call(target, controller, context);
            };
          }
          const value: unknown = Reflect.get(target, property, target);
          // Bound to the handler itself: its methods may use private fields a proxy does not have.
          return typeof value === "function" ? value.bind(target) : value;
        },
      });
      return dispatch(options, guarded);
    };
}
