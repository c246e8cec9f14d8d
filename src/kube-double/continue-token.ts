// The `continue` token of a paged list: where the next page starts and the resourceVersion of the list it
// continues (older than the store's history, it answers 410 Gone as the real server's expired tokens do).
import { badRequest } from "./status.ts";
import { isRecord } from "./types.ts";

export interface ContinueToken {
  /** The `namespace/name` of the last item sent. */
  after: string;
  resourceVersion: number;
}

export function encodeContinue(token: ContinueToken): string {
  return Buffer.from(JSON.stringify(token)).toString("base64url");
}

export function decodeContinue(token: string): ContinueToken {
  try {
    const parsed: unknown = JSON.parse(Buffer.from(token, "base64url").toString("utf8"));
    if (isRecord(parsed) && typeof parsed.after === "string" && typeof parsed.resourceVersion === "number") {
      return { after: parsed.after, resourceVersion: parsed.resourceVersion };
    }
  } catch (error) {
    throw badRequest("invalid continue token", undefined, { cause: error });
  }
  throw badRequest("invalid continue token");
}
