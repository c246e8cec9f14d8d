// When usage becomes visible. The spec: "Usage data is refreshed once a day shortly after midnight UTC." So a
// day's GPU-hours are published by the first refresh after that day has ended (at 00:00 UTC plus the refresh
// delay of the next day), never while the day is running: the current day is never in the answer, and the
// previous one only once the refresh has run.

/** `daily`: as the spec says (below). `live`: every day as accrued so far, for a playground where a day is long. */
export const USAGE_PUBLICATIONS = ["daily", "live"] as const;
export type UsagePublication = (typeof USAGE_PUBLICATIONS)[number];

/** "Shortly after midnight": the simulated refresh runs at 00:15 UTC. */
export const DEFAULT_USAGE_REFRESH_DELAY_MS = 15 * 60_000;

const DAY_MS = 24 * 3_600_000;

/** The first date (YYYY-MM-DD) whose usage is not published yet at `nowMs`. */
export function firstUnpublishedDate(nowMs: number, refreshDelayMs: number): string {
  return new Date(Math.floor((nowMs - refreshDelayMs) / DAY_MS) * DAY_MS).toISOString().slice(0, 10);
}

/** Only the items of days the last daily refresh has published. */
export function publishedUsage<T extends { date: string }>(
  items: readonly T[],
  nowMs: number,
  refreshDelayMs: number,
): T[] {
  const cutoff = firstUnpublishedDate(nowMs, refreshDelayMs);
  return items.filter((item) => item.date < cutoff);
}
