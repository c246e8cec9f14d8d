// How the cloud client's requests leave: undici's `request` underneath ky, the answer read as a Node stream (cut
// off at the size limit while it streams in), so that no answer goes through web streams chunk by chunk (their
// cost: ADR 0016, docs/scaling.md). A success is decoded to text as it arrives and handed to ky as a Response
// without a body, its text beside it (`answerText`): a page of a list is never held as bytes a second and third
// time (one buffer, then the Response's own copy) until V8 collects them (ADR 0033). An error answer is handed
// over as a Response over its bytes, where ky's error handling reads it. Redirects are never followed (undici's
// `request` does not), as with `redirect: "manual"`.
import { type Dispatcher, getGlobalDispatcher, request } from "undici";
import { isFenced } from "../util/fence.ts";

export type FetchFunction = (input: Request | string | URL, init?: RequestInit) => Promise<Response>;

/** An answer whose head has arrived; its body is still to be read. */
export interface AnswerHead {
  status: number;
  headers: Headers;
  /** Reads the body (at most `maxBytes`, else `tooLarge()` is thrown and the rest is not read). */
  read(maxBytes: number, tooLarge: () => Error): Promise<Response>;
}

/** The text of the successful answers read here (their Responses carry no body: see `read`). */
const decodedAnswers = new WeakMap<Response, string>();

/** An answer's body as text: as `read` decoded it, else read from the Response (`response.text()`). */
export async function answerText(response: Response): Promise<string> {
  return decodedAnswers.get(response) ?? response.text();
}

/** Statuses whose Response may not carry a body. */
const NULL_BODY_STATUSES: ReadonlySet<number> = new Set([101, 204, 205, 304]);

/**
 * Sends what ky hands its fetch (a Request, or a URL and init) with undici's `request`. `json`, when given, is the
 * body (sent as application/json) instead of the Request's: the transport hands ky no body at all, so no Request
 * carries one as a web stream that would be read here and then cancelled by ky (a refused cancel builds an error
 * with its stack: a fifth of each write's cost on this path).
 */
export async function sendRequest(
  input: Request | string | URL,
  init: RequestInit | undefined,
  dispatcher: Dispatcher = getGlobalDispatcher(),
  json?: string,
): Promise<AnswerHead> {
  const outgoing = input instanceof Request ? input : new Request(input, init);
  const headers: Record<string, string> = {};
  outgoing.headers.forEach((value, name) => {
    headers[name] = value;
  });
  const hasBody = outgoing.body !== null && outgoing.method !== "GET" && outgoing.method !== "HEAD";
  if (json !== undefined) headers["content-type"] = "application/json";
  const body = json ?? (hasBody ? Buffer.from(await outgoing.arrayBuffer()) : undefined);
  const signal = init?.signal ?? outgoing.signal;
  let answer: Dispatcher.ResponseData;
  try {
    answer = await request(outgoing.url, {
      method: outgoing.method as Dispatcher.HttpMethod,
      headers,
      ...(body !== undefined ? { body } : {}),
      ...(signal ? { signal } : {}),
      dispatcher,
    });
  } catch (error) {
    throw asFetchFailure(error, signal);
  }
  const responseHeaders = new Headers();
  for (const [name, value] of Object.entries(answer.headers)) {
    if (value === undefined) continue;
    if (Array.isArray(value)) for (const item of value) responseHeaders.append(name, item);
    else responseHeaders.set(name, value);
  }
  const status = answer.statusCode;
  return {
    status,
    headers: responseHeaders,
    read: async (maxBytes, tooLarge) => {
      // An error answer over the limit keeps its status and loses its text; a success over it is refused.
      const overLimit = (): Response => {
        answer.body.destroy();
        if (status < 400) throw tooLarge();
        const headers = new Headers(responseHeaders);
        headers.delete("content-length");
        headers.delete("content-encoding");
        return new Response(null, { status, headers });
      };
      const declared = Number(answer.headers["content-length"] ?? Number.NaN);
      if (Number.isFinite(declared) && declared > maxBytes) return overLimit();
      // A success is decoded as it streams in and handed over as text (answerText): its bytes are never copied
      // into one buffer, nor again into the Response, so a page of a list leaves no external memory behind it.
      const decoded = status >= 200 && status < 300 && !NULL_BODY_STATUSES.has(status);
      const decoder = decoded ? new TextDecoder() : undefined;
      const chunks: Buffer[] = [];
      let text = "";
      let received = 0;
      let over = false;
      try {
        for await (const chunk of answer.body) {
          const bytes = chunk as Buffer;
          received += bytes.byteLength;
          if (received > maxBytes) {
            over = true;
            break;
          }
          if (decoder !== undefined) text += decoder.decode(bytes, { stream: true });
          else chunks.push(bytes);
        }
      } catch (error) {
        throw asFetchFailure(error, signal);
      }
      if (over) return overLimit();
      if (decoder !== undefined) {
        const response = new Response(null, { status, headers: responseHeaders });
        decodedAnswers.set(response, text + decoder.decode());
        return response;
      }
      const content = NULL_BODY_STATUSES.has(status) ? null : chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
      return new Response(content as ConstructorParameters<typeof Response>[0], { status, headers: responseHeaders });
    },
  };
}

/**
 * A failure of the connection as WHATWG fetch reports it (`TypeError: fetch failed`, the socket's error as the
 * cause), so ky recognises a network error; an abort stays the signal's reason.
 */
function asFetchFailure(error: unknown, signal: AbortSignal | null | undefined): unknown {
  // A write the fence refused was never sent: no network failure (ky would count it as one).
  if (isFenced(error)) return error;
  if (signal?.aborted) return signal.reason ?? error;
  if (error instanceof Error && error.name === "AbortError") return error;
  return new TypeError("fetch failed", { cause: error });
}
