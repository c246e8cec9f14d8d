// The scale subresource of custom resources (`/scale`), as kube-apiserver serves it (apiextensions-apiserver
// pkg/registry/customresource/etcd.go, ScaleREST): GET answers an autoscaling/v1 Scale built from the CRD's
// specReplicasPath, statusReplicasPath and labelSelectorPath; PUT and PATCH change only the spec replicas field,
// through the object's own update (schema, CEL, generation, resourceVersion precondition).
// The paths themselves, as a CRD declares them, and the checks on every write: scale-paths.ts.
import type { KubeApi, PatchOptions, WriteOptions } from "./api.ts";
import { applyJsonBodyPatch } from "./patch.ts";
import { readPath, writePath } from "./scale-paths.ts";
import { ApiError, badRequest } from "./status.ts";
import { deepClone, isRecord, type KubeObject, type ResourceType, type ScalePaths } from "./types.ts";

function scalePaths(type: ResourceType): ScalePaths {
  if (type.scale === undefined) throw new ApiError(404, "NotFound", "the server could not find the requested resource");
  return type.scale;
}

/** The Scale of an object; `found` is false when the spec replicas field is absent (the real server's 500 on GET). */
function scaleOf(type: ResourceType, object: KubeObject): { scale: KubeObject; found: boolean } {
  const paths = scalePaths(type);
  const specReplicas = readPath(object, paths.specReplicasPath);
  const statusReplicas = readPath(object, paths.statusReplicasPath);
  const selector = paths.labelSelectorPath === undefined ? undefined : readPath(object, paths.labelSelectorPath);
  const { name, namespace, uid, resourceVersion, creationTimestamp } = object.metadata;
  return {
    found: typeof specReplicas === "number",
    scale: {
      kind: "Scale",
      apiVersion: "autoscaling/v1",
      metadata: { name, namespace, uid, resourceVersion, creationTimestamp },
      spec: { replicas: typeof specReplicas === "number" ? specReplicas : 0 },
      status: {
        replicas: typeof statusReplicas === "number" ? statusReplicas : 0,
        ...(typeof selector === "string" && selector !== "" ? { selector } : {}),
      },
    },
  };
}

export function getScale(api: KubeApi, type: ResourceType, namespace: string | undefined, name: string): KubeObject {
  const { scale, found } = scaleOf(type, api.get(type, namespace, name));
  if (!found) {
    throw new ApiError(
      500,
      "InternalError",
      `the spec replicas field "${scalePaths(type).specReplicasPath}" does not exist`,
    );
  }
  return scale;
}

/** A Scale body as sent: its replicas (0 when left out, as Go decodes it) and its resourceVersion precondition. */
function readScaleBody(body: unknown): { replicas: number; resourceVersion: string | undefined } {
  if (!isRecord(body)) throw badRequest("the request body must be a JSON object");
  if (body.kind !== undefined && body.kind !== "Scale")
    throw badRequest(`the kind of the object (${String(body.kind)}) does not match the kind of the URL (Scale)`);
  if (body.apiVersion !== undefined && body.apiVersion !== "autoscaling/v1")
    throw badRequest(
      `the API version in the data (${String(body.apiVersion)}) does not match the expected API version (autoscaling/v1)`,
    );
  const spec = isRecord(body.spec) ? body.spec : {};
  const replicas = spec.replicas ?? 0;
  if (typeof replicas !== "number" || !Number.isInteger(replicas) || replicas < -(2 ** 31) || replicas >= 2 ** 31) {
    throw badRequest(
      `Scale in version "v1" cannot be handled as a Scale: json: cannot unmarshal ${JSON.stringify(replicas)} into Go struct field ScaleSpec.spec.replicas of type int32`,
    );
  }
  const metadata = isRecord(body.metadata) ? body.metadata : {};
  const resourceVersion =
    typeof metadata.resourceVersion === "string" && metadata.resourceVersion !== ""
      ? metadata.resourceVersion
      : undefined;
  return { replicas, resourceVersion };
}

export function updateScale(
  api: KubeApi,
  type: ResourceType,
  namespace: string | undefined,
  name: string,
  body: unknown,
  options: WriteOptions,
): KubeObject {
  const paths = scalePaths(type);
  const current = api.get(type, namespace, name);
  const { replicas, resourceVersion } = readScaleBody(body);
  const next = deepClone(current);
  writePath(next, paths.specReplicasPath, replicas);
  next.metadata.resourceVersion = resourceVersion ?? current.metadata.resourceVersion;
  const updated = api.update(type, namespace, name, next, { ...options, subresource: "scale" });
  return scaleOf(type, updated).scale;
}

export function patchScale(
  api: KubeApi,
  type: ResourceType,
  namespace: string | undefined,
  name: string,
  contentType: string,
  rawBody: string,
  options: PatchOptions,
): KubeObject {
  const { scale, found } = scaleOf(type, api.get(type, namespace, name));
  // Like the real server: a missing spec replicas field reads as the smallest int32 to the patch, which must set it.
  const unset = -(2 ** 31);
  if (!found) scale.spec = { replicas: unset };
  // Scale is a built-in type: a strategic merge patch is a merge patch for its plain fields.
  const patched = applyJsonBodyPatch(scale, contentType, rawBody, true);
  const replicas = isRecord(patched) && isRecord(patched.spec) ? patched.spec.replicas : undefined;
  if (replicas === unset) {
    throw badRequest(`the spec replicas field "${scalePaths(type).specReplicasPath}" cannot be empty`);
  }
  return updateScale(api, type, namespace, name, patched, options);
}
