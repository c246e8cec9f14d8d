// Patch formats: JSON merge patch (RFC 7386), JSON patch (RFC 6902, with `test`), and the merge used by
// server-side apply.
import { ApiError, badRequest, unsupportedMediaType } from "./status.ts";
import { deepClone, deepEqual, isRecord } from "./types.ts";

export function applyMergePatch(target: unknown, patch: unknown): unknown {
  if (!isRecord(patch)) return deepClone(patch);
  const result: Record<string, unknown> = isRecord(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete result[key];
    else result[key] = applyMergePatch(result[key], value);
  }
  return result;
}

interface JsonPatchOperation {
  op: string;
  path: string;
  from?: string;
  value?: unknown;
}

function parsePointer(pointer: string): string[] {
  if (pointer === "") return [];
  if (!pointer.startsWith("/")) throw badRequest(`invalid JSON pointer "${pointer}"`);
  return pointer
    .slice(1)
    .split("/")
    .map((token) => token.replace(/~1/g, "/").replace(/~0/g, "~"));
}

function patchFailure(message: string): ApiError {
  return new ApiError(422, "Invalid", `the server rejected our request due to an error in our request: ${message}`);
}

function resolveParent(document: unknown, tokens: string[], pointer: string): { parent: unknown; key: string } {
  let current = document;
  for (const token of tokens.slice(0, -1)) {
    if (Array.isArray(current)) current = current[Number(token)];
    else if (isRecord(current)) current = current[token];
    else current = undefined;
    if (current === undefined) throw patchFailure(`path "${pointer}" does not exist`);
  }
  return { parent: current, key: tokens.at(-1) ?? "" };
}

function getAt(document: unknown, pointer: string): unknown {
  let current = document;
  for (const token of parsePointer(pointer)) {
    if (Array.isArray(current)) current = current[Number(token)];
    else if (isRecord(current)) current = current[token];
    else return undefined;
  }
  return current;
}

function removeAt(document: unknown, pointer: string): unknown {
  const tokens = parsePointer(pointer);
  const { parent, key } = resolveParent(document, tokens, pointer);
  if (Array.isArray(parent)) {
    const index = Number(key);
    if (!Number.isInteger(index) || index < 0 || index >= parent.length)
      throw patchFailure(`no element at "${pointer}"`);
    return parent.splice(index, 1)[0];
  }
  if (isRecord(parent) && key in parent) {
    const removed = parent[key];
    delete parent[key];
    return removed;
  }
  throw patchFailure(`unable to remove nonexistent key "${key}" at "${pointer}"`);
}

function addAt(document: unknown, pointer: string, value: unknown, replace: boolean): unknown {
  const tokens = parsePointer(pointer);
  if (tokens.length === 0) return deepClone(value);
  const { parent, key } = resolveParent(document, tokens, pointer);
  if (Array.isArray(parent)) {
    const index = key === "-" ? parent.length : Number(key);
    const limit = replace ? parent.length - 1 : parent.length;
    if (!Number.isInteger(index) || index < 0 || index > limit)
      throw patchFailure(`index out of range at "${pointer}"`);
    parent.splice(index, replace ? 1 : 0, deepClone(value));
  } else if (isRecord(parent)) {
    if (replace && !(key in parent)) throw patchFailure(`unable to replace nonexistent key "${key}" at "${pointer}"`);
    parent[key] = deepClone(value);
  } else {
    throw patchFailure(`path "${pointer}" does not exist`);
  }
  return document;
}

export function applyJsonPatch(target: unknown, operations: unknown): unknown {
  if (!Array.isArray(operations)) throw badRequest("a JSON patch must be an array of operations");
  let document = deepClone(target);
  for (const raw of operations) {
    if (!isRecord(raw) || typeof raw.op !== "string" || typeof raw.path !== "string") {
      throw badRequest(`invalid JSON patch operation ${JSON.stringify(raw)}`);
    }
    const operation = raw as unknown as JsonPatchOperation;
    switch (operation.op) {
      case "add":
        document = addAt(document, operation.path, operation.value, false);
        break;
      case "replace":
        document = addAt(document, operation.path, operation.value, true);
        break;
      case "remove":
        removeAt(document, operation.path);
        break;
      case "test":
        if (!deepEqual(getAt(document, operation.path), operation.value)) {
          throw patchFailure(`testing value ${JSON.stringify(operation.value)} at "${operation.path}" failed`);
        }
        break;
      case "move":
      case "copy": {
        if (operation.from === undefined) throw badRequest(`"${operation.op}" operation needs "from"`);
        const value = operation.op === "move" ? removeAt(document, operation.from) : getAt(document, operation.from);
        if (value === undefined) throw patchFailure(`path "${operation.from}" does not exist`);
        document = addAt(document, operation.path, value, false);
        break;
      }
      default:
        throw badRequest(`unknown JSON patch operation "${operation.op}"`);
    }
  }
  return document;
}

/** Server-side apply merge: maps merge key by key, everything else (lists included) is replaced. */
export function applyMerge(target: unknown, applied: unknown): unknown {
  if (!isRecord(applied) || !isRecord(target)) return deepClone(applied);
  const result: Record<string, unknown> = { ...target };
  for (const [key, value] of Object.entries(applied)) result[key] = applyMerge(result[key], value);
  return result;
}

/**
 * A merge, JSON or (when `strategicAsMerge`: a built-in type whose fields are all plain) strategic merge patch
 * applied to `target`; 400 for a body that is not JSON, 415 for another media type.
 */
export function applyJsonBodyPatch(
  target: unknown,
  contentType: string,
  rawBody: string,
  strategicAsMerge: boolean,
): unknown {
  const mediaType = contentType.split(";")[0]?.trim() ?? "";
  let body: unknown;
  try {
    body = JSON.parse(rawBody);
  } catch (error) {
    throw badRequest(`the body of the patch is not valid JSON: ${(error as Error).message}`, undefined, {
      cause: error,
    });
  }
  if (mediaType === "application/merge-patch+json") return applyMergePatch(target, body);
  if (mediaType === "application/json-patch+json") return applyJsonPatch(target, body);
  if (mediaType === "application/strategic-merge-patch+json" && strategicAsMerge) return applyMergePatch(target, body);
  throw unsupportedMediaType(contentType);
}
