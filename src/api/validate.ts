// Validation of manifests (examples, fixtures, user files) the way the API server would see them:
// the generated OpenAPI schema with unknown fields rejected (kubectl's fieldValidation=Strict), plus the zod
// schema, whose superRefine checks mirror the CEL one-of rules an offline check cannot evaluate.
import { Ajv, type ValidateFunction } from "ajv";
import addFormats from "ajv-formats";
import { parseAllDocuments } from "yaml";
import { isRecord } from "../util/is-record.ts";
import { openApiSchemaOf, type SchemaNode } from "./crd.ts";
import type { KindInfo } from "./kind-info.ts";
import { KINDS } from "./kinds.ts";
import { KUBERNETES_EXTENSIONS } from "./structural.ts";

/** A copy of the schema where objects with declared properties reject unknown ones (root metadata excepted). */
export function strictSchemaOf(node: SchemaNode): SchemaNode {
  const copy: SchemaNode = { ...node };
  if (isRecord(node.properties)) {
    const properties: Record<string, SchemaNode> = {};
    for (const [name, child] of Object.entries(node.properties)) properties[name] = strictSchemaOf(child);
    copy.properties = properties;
    if (node["x-kubernetes-preserve-unknown-fields"] !== true) copy.additionalProperties = false;
  }
  if (isRecord(node.items)) copy.items = strictSchemaOf(node.items);
  return copy;
}

export interface ManifestCheck {
  /** The object's kind, or undefined when it is not one of ours (such objects are not checked). */
  kind: string | undefined;
  /** Problems found, empty when valid. Each names the field. */
  problems: string[];
}

export interface ManifestValidator {
  check(object: unknown): ManifestCheck;
}

export function createManifestValidator(): ManifestValidator {
  const ajv = new Ajv({ allErrors: true, strict: true, strictTypes: false });
  addFormats.default(ajv);
  for (const keyword of KUBERNETES_EXTENSIONS) ajv.addKeyword({ keyword });
  const validators = new Map<string, ValidateFunction>();
  for (const info of KINDS) validators.set(info.kind, ajv.compile(strictSchemaOf(openApiSchemaOf(info))));

  return {
    check(object: unknown): ManifestCheck {
      if (!isRecord(object) || typeof object.kind !== "string") return { kind: undefined, problems: [] };
      const { apiVersion } = object;
      if (!KINDS.some((candidate) => candidate.apiVersion === apiVersion)) return { kind: undefined, problems: [] };
      const info = KINDS.find((candidate) => candidate.kind === object.kind && candidate.apiVersion === apiVersion);
      const validate = validators.get(object.kind);
      if (info === undefined || validate === undefined) {
        return { kind: object.kind, problems: [`kind ${object.kind} is not served by ${String(apiVersion)}`] };
      }
      return { kind: object.kind, problems: problemsOf(object, info, validate) };
    },
  };
}

/** What the OpenAPI schema (strict) and the zod spec schema find wrong with one object of a kind. */
function problemsOf(object: Record<string, unknown>, info: KindInfo, validate: ValidateFunction): string[] {
  const problems: string[] = [];
  if (!validate(object)) {
    for (const error of validate.errors ?? []) {
      const extra =
        isRecord(error.params) && "additionalProperty" in error.params
          ? ` '${String(error.params.additionalProperty)}'`
          : "";
      problems.push(`schema: ${error.instancePath || "/"} ${error.message ?? "is invalid"}${extra}`);
    }
  }
  const parsed = info.specSchema.safeParse(object.spec);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      problems.push(`rules: /spec${issue.path.map((part) => `/${String(part)}`).join("")} ${issue.message}`);
    }
  }
  return problems;
}

export interface ParsedManifest {
  /** Position of the document in its file, from 0. */
  index: number;
  object: unknown;
}

export class ManifestParseError extends Error {
  override name = "ManifestParseError";
}

/** Every non-empty YAML document of a file. Throws ManifestParseError naming the file on a syntax error. */
export function parseManifests(text: string, fileName: string): ParsedManifest[] {
  const documents = parseAllDocuments(text);
  const parsed: ParsedManifest[] = [];
  documents.forEach((document, index) => {
    if (document.errors.length > 0) {
      throw new ManifestParseError(`${fileName}: document ${index}: ${document.errors[0]?.message ?? "invalid YAML"}`);
    }
    const object: unknown = document.toJS();
    if (object !== null && object !== undefined) parsed.push({ index, object });
  });
  return parsed;
}
