// Bodies in and answers out: JSON answers with their length, request bodies read whole up to a limit (413
// beyond it), create and update bodies as JSON or the protobuf kubectl's typed clients send.
import type { IncomingMessage, ServerResponse } from "node:http";
import { decodeProtobufObject, isProtobuf } from "./protobuf.ts";
import { ApiError, badRequest, unsupportedMediaType } from "./status.ts";

const MAX_BODY_BYTES = 3 * 1024 * 1024;

export function sendJson(
  response: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const text = JSON.stringify(body);
  response.writeHead(status, {
    "Content-Type": "application/json",
    "Content-Length": Buffer.byteLength(text),
    ...headers,
  });
  response.end(text);
}

async function readRawBody(request: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    const buffer = chunk as Buffer;
    size += buffer.length;
    if (size > MAX_BODY_BYTES) throw new ApiError(413, "RequestEntityTooLarge", "the request body is too large");
    chunks.push(buffer);
  }
  return Buffer.concat(chunks);
}

export async function readBody(request: IncomingMessage): Promise<string> {
  return (await readRawBody(request)).toString("utf8");
}

/** Create and update bodies: JSON, or protobuf for the few built-in kinds kubectl's typed clients send. */
export async function readJsonBody(request: IncomingMessage): Promise<unknown> {
  const contentType = request.headers["content-type"] ?? "application/json";
  if (isProtobuf(contentType)) return decodeProtobufObject(await readRawBody(request), contentType);
  const mediaType = contentType.split(";")[0]?.trim() ?? "";
  if (mediaType !== "application/json" && mediaType !== "application/yaml" && mediaType !== "") {
    throw unsupportedMediaType(contentType);
  }
  return parseJson(await readBody(request), "the request body");
}

export function parseJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw badRequest(`${what} is not valid JSON: ${(error as Error).message}`, undefined, { cause: error });
  }
}
