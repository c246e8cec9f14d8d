// The scale subresource as a CRD declares it: its JSON paths (`subresources.scale`), read and written in an
// object, and the checks kube-apiserver makes on every write of a resource that has one. Apart from the `/scale`
// endpoint (scale.ts) so that reading a CRD and validating an object need nothing of the API's write path.
import type { StatusCause } from "./status.ts";
import { isRecord, type JsonObject, type KubeObject, type ResourceType, type ScalePaths } from "./types.ts";

/** `subresources.scale` of a CRD version, or undefined; `problems` names what is wrong with it. */
export function scalePathsOf(subresources: JsonObject, problems: string[]): ScalePaths | undefined {
  const scale = subresources.scale;
  if (!isRecord(scale)) return undefined;
  const path = (key: string, prefixes: string[]): string | undefined => {
    const value = scale[key];
    if (value === undefined) return undefined;
    if (typeof value !== "string" || !prefixes.some((prefix) => value.startsWith(prefix)) || value.includes("[")) {
      problems.push(`subresources.scale.${key}: must be a JSON path under ${prefixes.join(" or ")} without arrays`);
      return undefined;
    }
    return value;
  };
  const specReplicasPath = path("specReplicasPath", [".spec."]);
  const statusReplicasPath = path("statusReplicasPath", [".status."]);
  if (specReplicasPath === undefined || statusReplicasPath === undefined) {
    if (scale.specReplicasPath === undefined || scale.statusReplicasPath === undefined)
      problems.push("subresources.scale: specReplicasPath and statusReplicasPath are required");
    return undefined;
  }
  return { specReplicasPath, statusReplicasPath, labelSelectorPath: path("labelSelectorPath", [".spec.", ".status."]) };
}

function segments(path: string): string[] {
  return path.replace(/^\./, "").split(".");
}

/** The value at a scale path (`.spec.replicas`), undefined where any step is missing. */
export function readPath(object: unknown, path: string): unknown {
  let value = object;
  for (const key of segments(path)) value = isRecord(value) ? value[key] : undefined;
  return value;
}

/** Sets the value at a scale path, creating the maps on the way. */
export function writePath(object: JsonObject, path: string, value: unknown): void {
  const keys = segments(path);
  const last = keys.pop() ?? "";
  let node = object;
  for (const key of keys) {
    const child = node[key];
    const next: JsonObject = isRecord(child) ? child : {};
    node[key] = next;
    node = next;
  }
  node[last] = value;
}

/**
 * What kube-apiserver checks on every write of a resource with a scale subresource (ValidateScaleSpec and
 * ValidateScaleStatus): both replicas fields, when set, are non-negative int32s. The field is the CRD's path as
 * written (leading dot included), as the real server reports it.
 */
export function scaleCauses(type: ResourceType, object: KubeObject): StatusCause[] {
  if (type.scale === undefined) return [];
  const causes: StatusCause[] = [];
  for (const path of [type.scale.specReplicasPath, type.scale.statusReplicasPath]) {
    const value = readPath(object, path);
    if (typeof value !== "number" || !Number.isInteger(value)) continue;
    if (value < 0)
      causes.push({
        reason: "FieldValueInvalid",
        field: path,
        message: `Invalid value: ${value}: should be a non-negative integer`,
      });
    else if (value > 2 ** 31 - 1)
      causes.push({
        reason: "FieldValueInvalid",
        field: path,
        message: `Invalid value: ${value}: should be less than or equal to ${2 ** 31 - 1}`,
      });
  }
  return causes;
}
