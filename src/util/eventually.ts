// Waiting for something outside the process (a server, a child process, a watch) to reach a state: poll until
// the check gives a value, keeping the last error for the message when time runs out.
import { setTimeout as sleep } from "node:timers/promises";

/** Polls `check` every `intervalMs` until it gives a value other than undefined; throws after `timeoutMs`. */
export async function eventually<T>(
  description: string,
  check: () => Promise<T | undefined>,
  timeoutMs = 60_000,
  intervalMs = 200,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (error) {
      lastError = error; // keep polling: the thing may not exist yet
    }
    await sleep(intervalMs);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${description}`, { cause: lastError });
}
