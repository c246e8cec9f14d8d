// kubectl's typed clients (`kubectl create namespace|secret|configmap`) send built-in objects as Kubernetes
// protobuf (the "k8s\0" envelope around runtime.Unknown). This decodes just those three kinds into JSON;
// answers stay JSON, which those clients also accept.
import { ApiError, unsupportedMediaType } from "./status.ts";
import type { JsonObject } from "./types.ts";

const MAGIC = Buffer.from([0x6b, 0x38, 0x73, 0x00]);

interface Field {
  number: number;
  varint?: bigint;
  bytes?: Buffer;
}

function malformed(): ApiError {
  return new ApiError(400, "BadRequest", "the protobuf body of the request is malformed");
}

function readVarint(buffer: Buffer, start: number): { value: bigint; next: number } {
  let value = 0n;
  let shift = 0n;
  for (let position = start; position < buffer.length && shift < 70n; position++) {
    const byte = buffer[position] ?? 0;
    value |= BigInt(byte & 0x7f) << shift;
    if ((byte & 0x80) === 0) return { value, next: position + 1 };
    shift += 7n;
  }
  throw malformed();
}

function fields(buffer: Buffer): Field[] {
  const result: Field[] = [];
  let position = 0;
  while (position < buffer.length) {
    const tag = readVarint(buffer, position);
    position = tag.next;
    const number = Number(tag.value >> 3n);
    const wireType = Number(tag.value & 7n);
    if (wireType === 0) {
      const value = readVarint(buffer, position);
      result.push({ number, varint: value.value });
      position = value.next;
    } else if (wireType === 2) {
      const length = readVarint(buffer, position);
      const end = length.next + Number(length.value);
      if (end > buffer.length) throw malformed();
      result.push({ number, bytes: buffer.subarray(length.next, end) });
      position = end;
    } else if (wireType === 1 || wireType === 5) {
      position += wireType === 1 ? 8 : 4;
    } else {
      throw malformed();
    }
  }
  return result;
}

const text = (field: Field): string => field.bytes?.toString("utf8") ?? "";

function stringMap(entries: Field[], base64Values: boolean): Record<string, string> {
  const map: Record<string, string> = {};
  for (const entry of entries) {
    const parts = fields(entry.bytes ?? Buffer.alloc(0));
    const key = parts.find((part) => part.number === 1);
    const value = parts.find((part) => part.number === 2);
    map[key ? text(key) : ""] = value?.bytes ? (base64Values ? value.bytes.toString("base64") : text(value)) : "";
  }
  return map;
}

function grouped(buffer: Buffer): Map<number, Field[]> {
  const byNumber = new Map<number, Field[]>();
  for (const field of fields(buffer)) byNumber.set(field.number, [...(byNumber.get(field.number) ?? []), field]);
  return byNumber;
}

function objectMeta(buffer: Buffer): JsonObject {
  const byNumber = grouped(buffer);
  const meta: JsonObject = {};
  const strings: [number, string][] = [
    [1, "name"],
    [2, "generateName"],
    [3, "namespace"],
    [6, "resourceVersion"],
  ];
  for (const [number, name] of strings) {
    const field = byNumber.get(number)?.[0];
    if (field && text(field) !== "") meta[name] = text(field);
  }
  const labels = byNumber.get(11);
  if (labels) meta.labels = stringMap(labels, false);
  const annotations = byNumber.get(12);
  if (annotations) meta.annotations = stringMap(annotations, false);
  const finalizers = byNumber.get(14);
  if (finalizers) meta.finalizers = finalizers.map(text);
  return meta;
}

function decodeKind(kind: string, raw: Buffer): JsonObject {
  const byNumber = grouped(raw);
  const metadataField = byNumber.get(1)?.[0];
  const object: JsonObject = {
    apiVersion: "v1",
    kind,
    metadata: metadataField?.bytes ? objectMeta(metadataField.bytes) : {},
  };
  const immutable = (number: number): void => {
    const field = byNumber.get(number)?.[0];
    if (field?.varint !== undefined) object.immutable = field.varint !== 0n;
  };
  if (kind === "Secret") {
    if (byNumber.has(2)) object.data = stringMap(byNumber.get(2) ?? [], true);
    const type = byNumber.get(3)?.[0];
    if (type) object.type = text(type);
    if (byNumber.has(4)) object.stringData = stringMap(byNumber.get(4) ?? [], false);
    immutable(5);
  } else if (kind === "ConfigMap") {
    if (byNumber.has(2)) object.data = stringMap(byNumber.get(2) ?? [], false);
    if (byNumber.has(3)) object.binaryData = stringMap(byNumber.get(3) ?? [], true);
    immutable(4);
  }
  return object;
}

const SUPPORTED_KINDS = new Set(["Namespace", "Secret", "ConfigMap"]);

export function isProtobuf(contentType: string): boolean {
  return contentType.split(";")[0]?.trim() === "application/vnd.kubernetes.protobuf";
}

/** Decode a protobuf Namespace, Secret or ConfigMap; anything else is answered 415. */
export function decodeProtobufObject(body: Buffer, contentType: string): JsonObject {
  if (body.length < MAGIC.length || !body.subarray(0, MAGIC.length).equals(MAGIC)) throw malformed();
  const envelope = grouped(body.subarray(MAGIC.length));
  const typeMeta = grouped(envelope.get(1)?.[0]?.bytes ?? Buffer.alloc(0));
  const apiVersion = typeMeta.get(1)?.[0];
  const kindField = typeMeta.get(2)?.[0];
  const kind = kindField ? text(kindField) : "";
  if ((apiVersion ? text(apiVersion) : "") !== "v1" || !SUPPORTED_KINDS.has(kind))
    throw unsupportedMediaType(contentType);
  return decodeKind(kind, envelope.get(2)?.[0]?.bytes ?? Buffer.alloc(0));
}
