// A cloud account: the API URL (normalised, so that two spellings name one account) and the project. Claims are
// made in it, snapshots and trackers are kept per credential of it, and credentials that name another one than
// an object's resource lives in stop that object (AccountChanged).
import { normalizeApiUrl } from "../../util/api-url.ts";

/** The account a resource lives in: the normalised API URL and the project. */
export interface Account {
  apiUrl: string;
  projectId: string;
}

/** The account of an API URL as a Secret or flag gives it (normalised, so two spellings are one account). */
export function accountOf(apiUrl: string, projectId: string): Account {
  const parsed = normalizeApiUrl(apiUrl);
  return { apiUrl: parsed.ok ? parsed.url.href : apiUrl, projectId };
}

export const sameAccount = (a: Account, b: Account): boolean => a.apiUrl === b.apiUrl && a.projectId === b.projectId;
