// Keyset paging for the VM list. A token names the sort and the (sort key, id) of the item the page ends or
// starts at, so pages stay correct while VMs are added or removed between calls.
import { badRequest } from "./errors.ts";

export type SortField = "name" | "created_at" | "updated_at";

export interface SortSpec {
  field: SortField;
  descending: boolean;
}

export interface Keyed {
  id: string;
  sortKey: string | number;
}

interface Cursor {
  sort: string;
  key: string | number;
  id: string;
}

export function parseSort(value: string | undefined): SortSpec {
  const raw = value === undefined || value === "" ? "created_at" : value;
  const descending = raw.startsWith("-");
  const field = descending ? raw.slice(1) : raw;
  if (field !== "name" && field !== "created_at" && field !== "updated_at") {
    throw badRequest(`sort: must be name, created_at or updated_at, optionally prefixed with '-', got '${raw}'`);
  }
  return { field, descending };
}

function sortName(sort: SortSpec): string {
  return `${sort.descending ? "-" : ""}${sort.field}`;
}

function encodeCursor(sort: SortSpec, item: Keyed): string {
  const cursor: Cursor = { sort: sortName(sort), key: item.sortKey, id: item.id };
  return Buffer.from(JSON.stringify(cursor)).toString("base64url");
}

function decodeCursor(sort: SortSpec, token: string, parameter: string): Cursor {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(token, "base64url").toString("utf8"));
  } catch {
    throw badRequest(`${parameter}: not a page token issued by this server`);
  }
  if (
    typeof parsed !== "object" ||
    parsed === null ||
    !("sort" in parsed && "key" in parsed && "id" in parsed) ||
    typeof parsed.sort !== "string" ||
    (typeof parsed.key !== "string" && typeof parsed.key !== "number") ||
    typeof parsed.id !== "string"
  ) {
    throw badRequest(`${parameter}: not a page token issued by this server`);
  }
  if (parsed.sort !== sortName(sort)) {
    throw badRequest(`${parameter}: token was issued for sort '${parsed.sort}', not '${sortName(sort)}'`);
  }
  return { sort: parsed.sort, key: parsed.key, id: parsed.id };
}

function compareKeys(a: string | number, b: string | number): number {
  if (typeof a === "number" && typeof b === "number") return a - b;
  const left = String(a);
  const right = String(b);
  return left < right ? -1 : left > right ? 1 : 0;
}

export interface Page<T> {
  items: T[];
  next_page_token: string;
  prev_page_token: string;
}

/**
 * One page of `all` (already filtered) in the requested order. `nextToken` selects the items after its
 * cursor, `prevToken` the `limit` items before it.
 */
export function paginate<T extends Keyed>(
  all: T[],
  sort: SortSpec,
  limit: number,
  nextToken: string | undefined,
  prevToken: string | undefined,
): Page<T> {
  const direction = sort.descending ? -1 : 1;
  const compare = (a: { sortKey: string | number; id: string }, b: { sortKey: string | number; id: string }) => {
    const byKey = compareKeys(a.sortKey, b.sortKey);
    return direction * (byKey !== 0 ? byKey : a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
  };
  const sorted = [...all].sort(compare);
  let start = 0;
  let end = Math.min(limit, sorted.length);
  if (nextToken !== undefined && nextToken !== "") {
    const cursor = decodeCursor(sort, nextToken, "next_token");
    const after = { sortKey: cursor.key, id: cursor.id };
    start = sorted.findIndex((item) => compare(item, after) > 0);
    if (start < 0) start = sorted.length;
    end = Math.min(start + limit, sorted.length);
  } else if (prevToken !== undefined && prevToken !== "") {
    const cursor = decodeCursor(sort, prevToken, "prev_token");
    const before = { sortKey: cursor.key, id: cursor.id };
    end = sorted.findIndex((item) => compare(item, before) >= 0);
    if (end < 0) end = sorted.length;
    start = Math.max(0, end - limit);
  }
  const items = sorted.slice(start, end);
  const first = items[0];
  const last = items[items.length - 1];
  return {
    items,
    next_page_token: last !== undefined && end < sorted.length ? encodeCursor(sort, last) : "",
    prev_page_token: first !== undefined && start > 0 ? encodeCursor(sort, first) : "",
  };
}
