// The resource endpoints: a path below /api/v1 or /apis/<group>/<version> read as a resource, an object or a
// subresource (status, scale), and each verb on it answered through the API (api.ts): lists (as Tables when
// kubectl asks), watches (watch.ts), creates, reads, updates, patches and deletes, with the options of the query
// and the body.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { DeleteOptions, KubeApi, ListOptions, WriteOptions } from "./api.ts";
import { resourceList } from "./discovery.ts";
import { parseJson, readBody, readJsonBody, sendJson } from "./http-io.ts";
import type { ResourceRegistry } from "./resources.ts";
import { getScale, patchScale, updateScale } from "./scale.ts";
import { parseFieldSelector, parseLabelSelector } from "./selectors.ts";
import { ApiError, badRequest, methodNotAllowed } from "./status.ts";
import { columnDefinitions, tableRow, toTable, wantsTable } from "./table.ts";
import { isRecord, type KubeObject, type ResourceType } from "./types.ts";
import type { WatchHub } from "./watch.ts";

interface RequestContext {
  target: ResourceRoute;
  query: URLSearchParams;
  table: boolean;
  includeObject: string | null;
}

/** DeleteOptions from the body (what kubectl sends) and the query. */
function deleteOptionsFrom(body: unknown, query: URLSearchParams): DeleteOptions {
  const options = isRecord(body) ? body : {};
  const preconditions = isRecord(options.preconditions) ? options.preconditions : {};
  return {
    dryRun: query.get("dryRun") === "All" || (Array.isArray(options.dryRun) && options.dryRun.includes("All")),
    preconditions: {
      ...(typeof preconditions.uid === "string" ? { uid: preconditions.uid } : {}),
      ...(typeof preconditions.resourceVersion === "string" ? { resourceVersion: preconditions.resourceVersion } : {}),
    },
  };
}

interface ResourceRoute {
  type: ResourceType;
  namespace: string | undefined;
  name: string | undefined;
  subresource: string | undefined;
  watchPrefix: boolean;
}

function servesSubresource(type: ResourceType, subresource: string): boolean {
  return (subresource === "status" && type.statusSubresource) || (subresource === "scale" && type.scale !== undefined);
}

/** The resource, object and subresource a path names after its group and version; 404 for anything else. */
function routeOf(registry: ResourceRegistry, group: string, version: string, segments: string[]): ResourceRoute {
  let rest = segments;
  const watchPrefix = rest[0] === "watch";
  if (watchPrefix) rest = rest.slice(1);
  const notFound = new ApiError(404, "NotFound", "the server could not find the requested resource");
  const namespacedType =
    rest[0] === "namespaces" && rest.length >= 3 ? registry.find(group, version, rest[2] ?? "") : undefined;
  let result: ResourceRoute;
  if (namespacedType?.namespaced) {
    result = { type: namespacedType, namespace: rest[1], name: rest[3], subresource: rest[4], watchPrefix };
    if (rest.length > 5) throw notFound;
  } else {
    const type = registry.find(group, version, rest[0] ?? "");
    if (!type || rest.length > 3) throw notFound;
    if (type.namespaced && rest[1] !== undefined) throw notFound;
    result = { type, namespace: undefined, name: rest[1], subresource: rest[2], watchPrefix };
  }
  if (result.subresource !== undefined && !servesSubresource(result.type, result.subresource)) throw notFound;
  return result;
}

function listOptions(query: URLSearchParams): ListOptions {
  const limit = query.get("limit");
  return {
    labelSelector: parseLabelSelector(query.get("labelSelector")),
    fieldSelector: parseFieldSelector(query.get("fieldSelector")),
    limit: limit === null ? undefined : Number.parseInt(limit, 10),
    continueToken: query.get("continue") ?? undefined,
  };
}

function writeOptions(query: URLSearchParams, subresource: string | undefined): WriteOptions {
  return {
    strict: query.get("fieldValidation") === "Strict",
    fieldManager: query.get("fieldManager") ?? undefined,
    dryRun: query.get("dryRun") === "All",
    subresource: subresource === "status" ? "status" : undefined,
  };
}

/** One object, or a Table with one row when kubectl asks for tables. */
function respondWithObject(
  response: ServerResponse,
  context: RequestContext,
  status: number,
  object: KubeObject,
): void {
  if (!context.table) {
    sendJson(response, status, object);
    return;
  }
  sendJson(response, status, {
    kind: "Table",
    apiVersion: "meta.k8s.io/v1",
    metadata: { resourceVersion: object.metadata.resourceVersion },
    columnDefinitions: columnDefinitions(context.target.type),
    rows: [tableRow(context.target.type, object, context.includeObject)],
  });
}

/** The resource endpoints of one double. */
export class ResourceEndpoints {
  readonly #api: KubeApi;
  readonly #watches: WatchHub;

  constructor(api: KubeApi, watches: WatchHub) {
    this.#api = api;
    this.#watches = watches;
  }

  /** A path below /api/v1 or /apis/<group>/<version>: its resource list, or a resource endpoint. */
  async serve(request: IncomingMessage, response: ServerResponse, url: URL, pathname: string): Promise<void> {
    const match = /^\/(?:api\/(v1)|apis\/([^/]+)\/([^/]+))(?:\/(.*))?$/.exec(pathname);
    if (!match) throw new ApiError(404, "NotFound", "the server could not find the requested resource");
    const [group, version] = match[1] ? ["", "v1"] : [match[2] ?? "", match[3] ?? ""];
    const rest = match[4] ?? "";
    if (rest === "") {
      sendJson(response, 200, resourceList(this.#api.registry, group, version));
      return;
    }
    let segments: string[];
    try {
      segments = rest.split("/").map(decodeURIComponent);
    } catch (error) {
      throw badRequest(`malformed path ${pathname}`, undefined, { cause: error });
    }
    await this.#serveResource(request, response, url, routeOf(this.#api.registry, group, version, segments));
  }

  #serveWatch(response: ServerResponse, context: RequestContext): void {
    const { target, query } = context;
    const timeout = query.get("timeoutSeconds");
    const fieldSelector = parseFieldSelector(query.get("fieldSelector"));
    if (target.name !== undefined) fieldSelector.push({ path: ["metadata", "name"], equal: true, value: target.name });
    this.#watches.serve(
      {
        type: target.type,
        namespace: target.namespace,
        labelSelector: parseLabelSelector(query.get("labelSelector")),
        fieldSelector,
        resourceVersion: query.get("resourceVersion") ?? undefined,
        timeoutSeconds: timeout === null ? undefined : Number(timeout),
        allowBookmarks: query.get("allowWatchBookmarks") === "true",
        table: context.table ? { includeObject: context.includeObject } : undefined,
      },
      response,
    );
  }

  async #serveCollection(request: IncomingMessage, response: ServerResponse, context: RequestContext): Promise<void> {
    const { type, namespace } = context.target;
    const query = context.query;
    switch (request.method) {
      case "GET": {
        const list = this.#api.list(type, namespace, listOptions(query));
        const items = Array.isArray(list.items) ? (list.items as KubeObject[]) : [];
        sendJson(response, 200, context.table ? toTable(type, items, list.metadata, context.includeObject) : list);
        return;
      }
      case "POST": {
        const body = await readJsonBody(request);
        respondWithObject(
          response,
          context,
          201,
          this.#api.create(type, namespace, body, writeOptions(query, undefined)),
        );
        return;
      }
      case "DELETE":
        sendJson(
          response,
          200,
          this.#api.deleteCollection(type, namespace, { ...listOptions(query), dryRun: query.get("dryRun") === "All" }),
        );
        return;
      default:
        throw methodNotAllowed(`${request.method ?? ""} is not supported on a collection`);
    }
  }

  async #serveItem(
    request: IncomingMessage,
    response: ServerResponse,
    context: RequestContext,
    name: string,
  ): Promise<void> {
    const { type, namespace, subresource } = context.target;
    const query = context.query;
    if (subresource === "scale") {
      await this.#serveScale(request, response, context, name);
      return;
    }
    let result: KubeObject;
    let status = 200;
    switch (request.method) {
      case "GET":
        result = this.#api.get(type, namespace, name);
        break;
      case "PUT":
        result = this.#api.update(type, namespace, name, await readJsonBody(request), writeOptions(query, subresource));
        break;
      case "PATCH": {
        const contentType = request.headers["content-type"] ?? "";
        // An apply that creates the object answers 201 Created, like POST.
        const creates =
          contentType.startsWith("application/apply-patch+yaml") && !this.#api.exists(type, namespace, name);
        result = this.#api.patch(type, namespace, name, contentType, await readBody(request), {
          ...writeOptions(query, subresource),
          force: query.get("force") === "true",
        });
        if (creates) status = 201;
        break;
      }
      case "DELETE": {
        if (subresource !== undefined) throw methodNotAllowed("DELETE is not supported on a subresource");
        const text = await readBody(request);
        result = this.#api.delete(
          type,
          namespace,
          name,
          deleteOptionsFrom(text.trim() === "" ? {} : parseJson(text, "the delete options"), query),
        );
        break;
      }
      default:
        throw methodNotAllowed(`${request.method ?? ""} is not supported`);
    }
    respondWithObject(response, context, status, result);
  }

  /** `/scale`: an autoscaling/v1 Scale in and out, never a Table. */
  async #serveScale(
    request: IncomingMessage,
    response: ServerResponse,
    context: RequestContext,
    name: string,
  ): Promise<void> {
    const { type, namespace } = context.target;
    const options = writeOptions(context.query, undefined);
    switch (request.method) {
      case "GET":
        sendJson(response, 200, getScale(this.#api, type, namespace, name));
        return;
      case "PUT":
        sendJson(response, 200, updateScale(this.#api, type, namespace, name, await readJsonBody(request), options));
        return;
      case "PATCH": {
        const contentType = request.headers["content-type"] ?? "";
        const body = await readBody(request);
        sendJson(
          response,
          200,
          patchScale(this.#api, type, namespace, name, contentType, body, { ...options, force: false }),
        );
        return;
      }
      default:
        throw methodNotAllowed(`${request.method ?? ""} is not supported on the scale subresource`);
    }
  }

  async #serveResource(
    request: IncomingMessage,
    response: ServerResponse,
    url: URL,
    target: ResourceRoute,
  ): Promise<void> {
    const query = url.searchParams;
    const context: RequestContext = {
      target,
      query,
      table: wantsTable(request.headers.accept),
      includeObject: query.get("includeObject"),
    };
    const isWatch = target.watchPrefix || query.get("watch") === "true" || query.get("watch") === "1";
    if ((request.method ?? "GET") === "GET" && isWatch) this.#serveWatch(response, context);
    else if (target.name === undefined) await this.#serveCollection(request, response, context);
    else await this.#serveItem(request, response, context, target.name);
  }
}
