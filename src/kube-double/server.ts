// HTTP front of the double: routing of the Kubernetes REST paths, discovery, OpenAPI, tables, watches and
// the `/_double/faults` admin endpoints.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "pino";
import type { BoundedLog } from "../util/bounded-log.ts";
import type { DeleteOptions, KubeApi, ListOptions, WriteOptions } from "./api.ts";
import type { FaultState } from "./faults.ts";
import { groupVersionDocument, rootDocument } from "./openapi.ts";
import { decodeProtobufObject, isProtobuf } from "./protobuf.ts";
import { getScale, patchScale, updateScale } from "./scale.ts";
import { parseFieldSelector, parseLabelSelector } from "./selectors.ts";
import { ApiError, badRequest, methodNotAllowed, unsupportedMediaType } from "./status.ts";
import { columnDefinitions, tableRow, toTable, wantsTable } from "./table.ts";
import { isRecord, type KubeObject, type ResourceType } from "./types.ts";
import type { WatchHub } from "./watch.ts";
import type { KubeWrite } from "./write-log.ts";

const MAX_BODY_BYTES = 3 * 1024 * 1024;

export interface ServerDeps {
  api: KubeApi;
  watches: WatchHub;
  faults: FaultState;
  adminActions: { dropWatches(): void; endWatches(): void; compact(): void };
  logger: Logger;
  /** Every write received (who, when, what, answered how). */
  writes: BoundedLog<KubeWrite>;
}

function sendJson(response: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
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

async function readBody(request: IncomingMessage): Promise<string> {
  return (await readRawBody(request)).toString("utf8");
}

/** Create and update bodies: JSON, or protobuf for the few built-in kinds kubectl's typed clients send. */
async function readJsonBody(request: IncomingMessage): Promise<unknown> {
  const contentType = request.headers["content-type"] ?? "application/json";
  if (isProtobuf(contentType)) return decodeProtobufObject(await readRawBody(request), contentType);
  const mediaType = contentType.split(";")[0]?.trim() ?? "";
  if (mediaType !== "application/json" && mediaType !== "application/yaml" && mediaType !== "") {
    throw unsupportedMediaType(contentType);
  }
  return parseJson(await readBody(request), "the request body");
}

function parseJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw badRequest(`${what} is not valid JSON: ${(error as Error).message}`, undefined, { cause: error });
  }
}

function verbsOf(type: ResourceType): string[] {
  return ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"].filter(
    (verb) => type.custom || type.plural !== "namespaces" || verb !== "deletecollection",
  );
}

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

export function createRequestHandler(deps: ServerDeps): (request: IncomingMessage, response: ServerResponse) => void {
  const { api, logger } = deps;
  const registry = api.registry;

  const discovery = (pathname: string): unknown => {
    if (pathname === "/version") {
      return {
        major: "1",
        minor: "32",
        gitVersion: "v1.32.0-kube-double",
        gitCommit: "",
        gitTreeState: "clean",
        buildDate: "2026-01-01T00:00:00Z",
        goVersion: "n/a",
        compiler: "n/a",
        platform: "linux/amd64",
      };
    }
    if (pathname === "/api")
      return {
        kind: "APIVersions",
        versions: ["v1"],
        serverAddressByClientCIDRs: [{ clientCIDR: "0.0.0.0/0", serverAddress: "127.0.0.1" }],
      };
    if (pathname === "/apis") {
      return {
        kind: "APIGroupList",
        apiVersion: "v1",
        groups: registry.groups().map((group) => {
          const versions = group.versions.map((version) => ({ groupVersion: `${group.name}/${version}`, version }));
          return { name: group.name, versions, preferredVersion: versions[0] };
        }),
      };
    }
    if (pathname === "/openapi/v3") return rootDocument(registry);
    const openapi = /^\/openapi\/v3\/(?:api\/(v1)|apis\/([^/]+)\/([^/]+))$/.exec(pathname);
    if (openapi) {
      const document = openapi[1]
        ? groupVersionDocument(registry, "", "v1")
        : groupVersionDocument(registry, openapi[2] ?? "", openapi[3] ?? "");
      if (document === undefined) throw new ApiError(404, "NotFound", `no OpenAPI document for ${pathname}`);
      return document;
    }
    const groupOnly = /^\/apis\/([^/]+)$/.exec(pathname);
    if (groupOnly) {
      const group = registry.groups().find((candidate) => candidate.name === groupOnly[1]);
      if (!group) throw new ApiError(404, "NotFound", `the server could not find the requested resource`);
      const versions = group.versions.map((version) => ({ groupVersion: `${group.name}/${version}`, version }));
      return { kind: "APIGroup", apiVersion: "v1", name: group.name, versions, preferredVersion: versions[0] };
    }
    return undefined;
  };

  const resourceList = (group: string, version: string): unknown => {
    const types = registry.all().filter((type) => type.group === group && type.version === version);
    if (types.length === 0) throw new ApiError(404, "NotFound", "the server could not find the requested resource");
    return {
      kind: "APIResourceList",
      apiVersion: "v1",
      groupVersion: group === "" ? version : `${group}/${version}`,
      resources: types.flatMap((type) => [
        {
          name: type.plural,
          singularName: type.singular,
          namespaced: type.namespaced,
          kind: type.kind,
          verbs: verbsOf(type),
          ...(type.shortNames.length > 0 ? { shortNames: type.shortNames } : {}),
          ...(type.categories.length > 0 ? { categories: type.categories } : {}),
        },
        ...(type.statusSubresource
          ? [
              {
                name: `${type.plural}/status`,
                singularName: "",
                namespaced: type.namespaced,
                kind: type.kind,
                verbs: ["get", "patch", "update"],
              },
            ]
          : []),
        // kubectl scale and the HorizontalPodAutoscaler find the Scale's group and version here.
        ...(type.scale !== undefined
          ? [
              {
                name: `${type.plural}/scale`,
                singularName: "",
                namespaced: type.namespaced,
                group: "autoscaling",
                version: "v1",
                kind: "Scale",
                verbs: ["get", "patch", "update"],
              },
            ]
          : []),
      ]),
    };
  };

  const route = (group: string, version: string, segments: string[]): ResourceRoute => {
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
  };

  const listOptions = (query: URLSearchParams): ListOptions => {
    const limit = query.get("limit");
    return {
      labelSelector: parseLabelSelector(query.get("labelSelector")),
      fieldSelector: parseFieldSelector(query.get("fieldSelector")),
      limit: limit === null ? undefined : Number.parseInt(limit, 10),
      continueToken: query.get("continue") ?? undefined,
    };
  };

  const writeOptions = (query: URLSearchParams, subresource: string | undefined): WriteOptions => ({
    strict: query.get("fieldValidation") === "Strict",
    fieldManager: query.get("fieldManager") ?? undefined,
    dryRun: query.get("dryRun") === "All",
    subresource: subresource === "status" ? "status" : undefined,
  });

  /** One object, or a Table with one row when kubectl asks for tables. */
  const respondWithObject = (
    response: ServerResponse,
    context: RequestContext,
    status: number,
    object: KubeObject,
  ): void => {
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
  };

  const serveWatch = (response: ServerResponse, context: RequestContext): void => {
    const { target, query } = context;
    const timeout = query.get("timeoutSeconds");
    const fieldSelector = parseFieldSelector(query.get("fieldSelector"));
    if (target.name !== undefined) fieldSelector.push({ path: ["metadata", "name"], equal: true, value: target.name });
    deps.watches.serve(
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
  };

  const serveCollection = async (
    request: IncomingMessage,
    response: ServerResponse,
    context: RequestContext,
  ): Promise<void> => {
    const { type, namespace } = context.target;
    const query = context.query;
    switch (request.method) {
      case "GET": {
        const list = api.list(type, namespace, listOptions(query));
        const items = Array.isArray(list.items) ? (list.items as KubeObject[]) : [];
        sendJson(response, 200, context.table ? toTable(type, items, list.metadata, context.includeObject) : list);
        return;
      }
      case "POST": {
        const body = await readJsonBody(request);
        respondWithObject(response, context, 201, api.create(type, namespace, body, writeOptions(query, undefined)));
        return;
      }
      case "DELETE":
        sendJson(
          response,
          200,
          api.deleteCollection(type, namespace, { ...listOptions(query), dryRun: query.get("dryRun") === "All" }),
        );
        return;
      default:
        throw methodNotAllowed(`${request.method ?? ""} is not supported on a collection`);
    }
  };

  const serveItem = async (
    request: IncomingMessage,
    response: ServerResponse,
    context: RequestContext,
    name: string,
  ): Promise<void> => {
    const { type, namespace, subresource } = context.target;
    const query = context.query;
    if (subresource === "scale") {
      await serveScale(request, response, context, name);
      return;
    }
    let result: KubeObject;
    let status = 200;
    switch (request.method) {
      case "GET":
        result = api.get(type, namespace, name);
        break;
      case "PUT":
        result = api.update(type, namespace, name, await readJsonBody(request), writeOptions(query, subresource));
        break;
      case "PATCH": {
        const contentType = request.headers["content-type"] ?? "";
        // An apply that creates the object answers 201 Created, like POST.
        const creates = contentType.startsWith("application/apply-patch+yaml") && !api.exists(type, namespace, name);
        result = api.patch(type, namespace, name, contentType, await readBody(request), {
          ...writeOptions(query, subresource),
          force: query.get("force") === "true",
        });
        if (creates) status = 201;
        break;
      }
      case "DELETE": {
        if (subresource !== undefined) throw methodNotAllowed("DELETE is not supported on a subresource");
        const text = await readBody(request);
        result = api.delete(
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
  };

  /** `/scale`: an autoscaling/v1 Scale in and out, never a Table. */
  const serveScale = async (
    request: IncomingMessage,
    response: ServerResponse,
    context: RequestContext,
    name: string,
  ): Promise<void> => {
    const { type, namespace } = context.target;
    const options = writeOptions(context.query, undefined);
    switch (request.method) {
      case "GET":
        sendJson(response, 200, getScale(api, type, namespace, name));
        return;
      case "PUT":
        sendJson(response, 200, updateScale(api, type, namespace, name, await readJsonBody(request), options));
        return;
      case "PATCH": {
        const contentType = request.headers["content-type"] ?? "";
        const body = await readBody(request);
        sendJson(
          response,
          200,
          patchScale(api, type, namespace, name, contentType, body, { ...options, force: false }),
        );
        return;
      }
      default:
        throw methodNotAllowed(`${request.method ?? ""} is not supported on the scale subresource`);
    }
  };

  const handleResource = async (
    request: IncomingMessage,
    response: ServerResponse,
    url: URL,
    target: ResourceRoute,
  ): Promise<void> => {
    const query = url.searchParams;
    const context: RequestContext = {
      target,
      query,
      table: wantsTable(request.headers.accept),
      includeObject: query.get("includeObject"),
    };
    const isWatch = target.watchPrefix || query.get("watch") === "true" || query.get("watch") === "1";
    if ((request.method ?? "GET") === "GET" && isWatch) serveWatch(response, context);
    else if (target.name === undefined) await serveCollection(request, response, context);
    else await serveItem(request, response, context, target.name);
  };

  const adminActions: Record<string, (input: Record<string, unknown>) => void> = {
    "drop-watches": () => deps.adminActions.dropWatches(),
    "end-watches": () => deps.adminActions.endWatches(),
    compact: () => deps.adminActions.compact(),
    "fail-next": (input) =>
      deps.faults.addFailure(
        Number(input.count ?? 1),
        Number(input.status ?? 500),
        typeof input.path === "string" ? { path: input.path } : undefined,
      ),
    latency: (input) => {
      const ms = Number(input.ms);
      if (!Number.isFinite(ms) || ms < 0) throw new RangeError("latency needs a non-negative number 'ms'");
      deps.faults.latencyMs = ms;
    },
  };

  const handleAdmin = async (request: IncomingMessage, response: ServerResponse, pathname: string): Promise<void> => {
    const name = pathname.slice("/_double/faults/".length);
    const action = adminActions[name];
    if (!action) throw new ApiError(404, "NotFound", `unknown fault action "${name}"`);
    const text = await readBody(request);
    const body = text.trim() === "" ? {} : parseJson(text, "the fault request");
    try {
      action(isRecord(body) ? body : {});
    } catch (error) {
      if (error instanceof RangeError) throw badRequest(error.message, undefined, { cause: error });
      throw error;
    }
    sendJson(response, 200, { ok: true, openWatches: deps.watches.openCount });
  };

  /** Answer with an injected failure if one is pending for this path. */
  const answeredWithFault = (response: ServerResponse, pathname: string): boolean => {
    const failure = deps.faults.take(pathname);
    if (failure === undefined) return false;
    const reason = failure === 429 ? "TooManyRequests" : failure >= 500 ? "InternalError" : "BadRequest";
    const details = failure === 429 ? { retryAfterSeconds: 1 } : undefined;
    const error = new ApiError(failure, reason, `injected failure (${failure})`, details);
    sendJson(response, failure, error.toStatus(), failure === 429 ? { "Retry-After": "1" } : {});
    return true;
  };

  const handleApi = async (
    request: IncomingMessage,
    response: ServerResponse,
    url: URL,
    pathname: string,
  ): Promise<void> => {
    const match = /^\/(?:api\/(v1)|apis\/([^/]+)\/([^/]+))(?:\/(.*))?$/.exec(pathname);
    if (!match) throw new ApiError(404, "NotFound", "the server could not find the requested resource");
    const [group, version] = match[1] ? ["", "v1"] : [match[2] ?? "", match[3] ?? ""];
    const rest = match[4] ?? "";
    if (rest === "") {
      sendJson(response, 200, resourceList(group, version));
      return;
    }
    let segments: string[];
    try {
      segments = rest.split("/").map(decodeURIComponent);
    } catch (error) {
      throw badRequest(`malformed path ${pathname}`, undefined, { cause: error });
    }
    await handleResource(request, response, url, route(group, version, segments));
  };

  const handle = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    const url = new URL(request.url ?? "/", "http://kube-double.invalid");
    const pathname = url.pathname.replace(/\/+$/, "") || "/";
    if (pathname.startsWith("/_double/faults/") && request.method === "POST") {
      await handleAdmin(request, response, pathname);
      return;
    }
    const method = request.method ?? "GET";
    if (method !== "GET") {
      const userAgent = String(request.headers["user-agent"] ?? "");
      const logged: KubeWrite = deps.writes.push({ at: Date.now(), method, path: pathname, userAgent });
      response.once("finish", () => {
        logged.status = response.statusCode;
      });
    }
    if (deps.faults.latencyMs > 0) await new Promise((resolve) => setTimeout(resolve, deps.faults.latencyMs));
    if (answeredWithFault(response, pathname)) return;
    if (["/healthz", "/livez", "/readyz"].includes(pathname)) {
      response.writeHead(200, { "Content-Type": "text/plain" });
      response.end("ok");
      return;
    }
    const answer = discovery(pathname);
    if (answer === undefined) await handleApi(request, response, url, pathname);
    else sendJson(response, 200, answer);
  };

  return (request, response) => {
    handle(request, response).catch((error: unknown) => {
      const apiError =
        error instanceof ApiError
          ? error
          : new ApiError(
              500,
              "InternalError",
              `internal error: ${error instanceof Error ? error.message : String(error)}`,
              undefined,
              { cause: error },
            );
      if (apiError.code >= 500)
        logger.error({ err: error, method: request.method, url: request.url }, "request failed");
      else
        logger.debug(
          { method: request.method, url: request.url, code: apiError.code, reason: apiError.reason },
          "request refused",
        );
      if (response.headersSent) {
        response.destroy();
        return;
      }
      sendJson(response, apiError.code, apiError.toStatus());
    });
  };
}
