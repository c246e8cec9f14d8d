// Discovery as kubectl and client libraries read it: /version, the /api and /apis group lists, one group's
// versions, a group-version's APIResourceList (with the status and scale subresources) and the OpenAPI v3
// documents of openapi.ts.
import { groupVersionDocument, rootDocument } from "./openapi.ts";
import type { ResourceRegistry } from "./resources.ts";
import { ApiError } from "./status.ts";
import type { ResourceType } from "./types.ts";

function verbsOf(type: ResourceType): string[] {
  return ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"].filter(
    (verb) => type.custom || type.plural !== "namespaces" || verb !== "deletecollection",
  );
}

/** The discovery answer for `pathname`, or undefined when it is not a discovery path. */
export function discoveryDocument(registry: ResourceRegistry, pathname: string): unknown {
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
}

/** A group-version's APIResourceList: its resources, their verbs and subresources (`/api/v1`, `/apis/g/v`). */
export function resourceList(registry: ResourceRegistry, group: string, version: string): unknown {
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
}
