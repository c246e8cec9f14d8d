// docs/crd-reference.md, generated from the same structural schemas as crds/ (so from the zod metadata):
// one field table per kind for spec and status, the CEL rules, the printer columns, annotations and reasons.

import { CLUSTER_API_CATEGORY, INFRASTRUCTURE_API_VERSION, isInfrastructureKind } from "./cluster-api.ts";
import { ANNOTATIONS, API_VERSION, CATEGORY, FINALIZER } from "./common.ts";
import { crdFileName, openApiSchemaOf, type SchemaNode } from "./crd.ts";
import type { KindInfo } from "./kind-info.ts";
import { KINDS } from "./kinds.ts";
import { CONDITION_TYPES, REASON_DESCRIPTIONS, REASONS } from "./reasons.ts";

const ANNOTATION_DESCRIPTIONS: Record<keyof typeof ANNOTATIONS, string> = {
  paused: '`"true"` stops every cloud call for the object; status shows reason `Paused`. Remove it to resume.',
  resetRequestedAt:
    "GpuVm only. A timestamp (RFC 3339); each new value newer than `status.lastResetRequestedAt` resets the VM once.",
  syncPeriod:
    "A duration such as `5m` or `1h`: how often a Ready object is re-read from the cloud to detect drift. At " +
    "least `10s`: a shorter value is raised to `10s` and reported (Warning Event `SyncPeriodRaised`, log line).",
  deleteFirst:
    'GpuVm of a GpuVmPool only. `"true"` makes this replica the first one removed when the pool scales down.',
};

/** Escape a table cell: pipes split cells, newlines end rows. */
function cell(text: string): string {
  return text.replace(/\|/g, "\\|").replace(/\r?\n/g, " ");
}

/** A prose cell: also escape angle brackets, which Markdown would read as HTML. */
function prose(text: string): string {
  return cell(text).replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

function code(value: unknown): string {
  return `\`${typeof value === "string" ? value : JSON.stringify(value)}\``;
}

function typeName(node: SchemaNode): string {
  if (node.type === "array" && node.items !== undefined) return `[]${typeName(node.items)}`;
  if (
    node.type === "object" &&
    node.additionalProperties !== undefined &&
    typeof node.additionalProperties === "object"
  ) {
    return `map[string]${typeName(node.additionalProperties)}`;
  }
  return node.type ?? "any";
}

function constraints(node: SchemaNode): string[] {
  const found: string[] = [];
  if (Array.isArray(node.enum)) found.push(`one of ${node.enum.map(code).join(", ")}`);
  if (typeof node.format === "string") found.push(`format ${node.format}`);
  if (typeof node.minimum === "number") found.push(`≥ ${node.minimum}`);
  if (typeof node.maximum === "number") found.push(`≤ ${node.maximum}`);
  if (typeof node.minLength === "number" && node.minLength > 0) found.push(`min length ${node.minLength}`);
  if (typeof node.maxLength === "number") found.push(`max length ${node.maxLength}`);
  if (typeof node.minItems === "number") found.push(`min items ${node.minItems}`);
  if (typeof node.maxItems === "number") found.push(`max items ${node.maxItems}`);
  if (typeof node["x-kubernetes-list-type"] === "string" && node["x-kubernetes-list-type"] !== "atomic") {
    found.push(`list type ${node["x-kubernetes-list-type"]}`);
  }
  if (typeof node.pattern === "string") found.push(`pattern ${code(node.pattern)}`);
  return found;
}

interface FieldRow {
  path: string;
  node: SchemaNode;
  required: boolean;
}

function fieldRows(node: SchemaNode, path: string): FieldRow[] {
  const rows: FieldRow[] = [];
  const required = new Set(node.required ?? []);
  for (const [name, child] of Object.entries(node.properties ?? {})) {
    const childPath = `${path}.${name}`;
    rows.push({ path: childPath, node: child, required: required.has(name) });
    const nested = child.type === "array" && child.items !== undefined ? child.items : child;
    const nestedPath = child.type === "array" ? `${childPath}[]` : childPath;
    rows.push(...fieldRows(nested, nestedPath));
  }
  return rows;
}

function fieldTable(node: SchemaNode, path: string): string {
  const lines = ["| Field | Type | Default | Description |", "| --- | --- | --- | --- |"];
  for (const row of fieldRows(node, path)) {
    const type = [typeName(row.node), ...(row.required ? ["required"] : []), ...constraints(row.node)].join(", ");
    const defaultValue = row.node.default === undefined ? "" : code(row.node.default);
    lines.push(`| ${code(row.path)} | ${cell(type)} | ${cell(defaultValue)} | ${prose(row.node.description ?? "")} |`);
  }
  return lines.join("\n");
}

interface RuleRow {
  path: string;
  rule: string;
  message: string;
}

function ruleRows(node: SchemaNode, path: string): RuleRow[] {
  const rows: RuleRow[] = [];
  const rules = node["x-kubernetes-validations"];
  if (Array.isArray(rules)) {
    for (const rule of rules as { rule: string; message: string }[]) {
      rows.push({ path, rule: rule.rule, message: rule.message });
    }
  }
  for (const [name, child] of Object.entries(node.properties ?? {})) rows.push(...ruleRows(child, `${path}.${name}`));
  if (node.items !== undefined) rows.push(...ruleRows(node.items, `${path}[]`));
  return rows;
}

function kindSection(info: KindInfo): string {
  const schema = openApiSchemaOf(info);
  const spec = schema.properties?.spec ?? {};
  const status = schema.properties?.status ?? {};
  const rules = ruleRows(spec, "spec");
  const parts = [
    `## ${info.kind}`,
    prose(info.description),
    `\`${info.apiVersion}\`, plural \`${info.plural}\`, short name${info.shortNames.length > 1 ? "s" : ""} ${info.shortNames.map(code).join(", ")}, ` +
      `CRD [\`crds/${crdFileName(info)}\`](../crds/${crdFileName(info)}).`,
    "### Spec",
    fieldTable(spec, "spec"),
    "### Validation rules (CEL, checked by the API server)",
    "Rules that read `oldSelf` apply to updates only.",
    ["| Applies to | Message | Rule |", "| --- | --- | --- |"]
      .concat(rules.map((row) => `| ${code(row.path)} | ${prose(row.message)} | ${cell(code(row.rule))} |`))
      .join("\n"),
    "### Status",
    fieldTable(status, "status"),
    "### Printer columns",
    ["| Column | JSONPath | Shown |", "| --- | --- | --- |"]
      .concat(
        info.printerColumns.map(
          (column) =>
            `| ${column.name.toUpperCase()} | ${cell(code(column.jsonPath))} | ${column.priority === undefined ? "always" : "with `-o wide`"} |`,
        ),
      )
      .join("\n"),
  ];
  return parts.join("\n\n");
}

/** The whole of docs/crd-reference.md. Deterministic. */
export function generateCrdReference(): string {
  const annotationRows = (Object.keys(ANNOTATIONS) as (keyof typeof ANNOTATIONS)[]).map(
    (key) => `| ${code(ANNOTATIONS[key])} | ${prose(ANNOTATION_DESCRIPTIONS[key])} |`,
  );
  const reasonRows = Object.values(REASONS).map(
    (reason) => `| ${code(reason)} | ${prose(REASON_DESCRIPTIONS[reason])} |`,
  );
  const sections = [
    "# Custom resource reference",
    "<!-- Generated by `npm run generate` from src/api. Do not edit by hand. -->",
    `The kinds of cloud resources are in \`${API_VERSION}\`, namespaced, in the category \`${CATEGORY}\` ` +
      `(\`kubectl get ${CATEGORY}\` lists them all) and have a status subresource. Cluster API's infrastructure ` +
      `kinds (${KINDS.filter(isInfrastructureKind)
        .map((info) => info.kind)
        .join(", ")}) are in \`${INFRASTRUCTURE_API_VERSION}\`, in the category \`${CLUSTER_API_CATEGORY}\`: ` +
      "see [cluster-api.md](cluster-api.md) for the contract they implement. Every kind of cloud resource shares the managed fields " +
      "`cloudName`, `credentialsRef`, `deletionPolicy`, `managementPolicy` and `id`, and the status fields " +
      "`observedGeneration`, `conditions`, `id`, `operation`, `operations`, `lastError`, `createPending`, " +
      "`actionPending`, `projectId` and `locationIndex`. A GpuVmPool is no cloud resource: it owns GpuVms and " +
      "GpuDisks, and has the scale subresource. " +
      `The operator puts the finalizer \`${FINALIZER}\` on every object it manages.`,
    KINDS.map((info) => `- [${info.kind}](#${info.kind.toLowerCase()})`).join("\n"),
    ...KINDS.map(kindSection),
    "## Create-only fields",
    "Some values are taken by the cloud only when it creates a resource. Given inline in the spec they are " +
      "immutable: the API server refuses a change with a message saying what to do instead (a GpuVm's `image`, " +
      "`sshPublicKey`, `startupScript`, `shutdownScript` and their `*Ref` fields; a GpuDisk's `location`, " +
      "`type`, `blockSize`; a GpuNetwork's `cidr`; a GpuFirewallRule's network, `direction` and `action`). " +
      "Values read from a Secret or ConfigMap can change without the API server knowing: the operator records " +
      "digests of what a resource was created with (`status.createOnlyDigests`) and reports a later change as " +
      "the condition `UpToDate=False` with reason `CreateOnlyFieldChanged` (the message names the field and " +
      "its Secret or ConfigMap), `Synced=False` with the same reason, a Warning Event and the `Up-To-Date` " +
      "column (`kubectl get -o wide`). The change is not applied: restore the value, or delete and re-create the " +
      "object. `Ready` stays as it is (the resource still works).",
    "## Conditions",
    `Condition types: ${CONDITION_TYPES.map(code).join(", ")}. The kstatus three: \`Ready\` says whether the ` +
      "resource is usable, `Reconciling` that work is in progress and will end by itself, `Stalled` that progress " +
      "needs a change from you (the message says which; a stall on a missing or departing reference ends by " +
      "itself once the reference is fixed). Outside kstatus (Argo CD and Flux health do not read them): `Synced` " +
      "whether the cloud resource is in step with the spec (the SYNCED column, as Crossplane's): `True` when the " +
      "last look found it as the spec asks, `False` while a change is applied or when it cannot be (the reason " +
      "says why), and when the operator could not look (credentials, an unavailable API, paused) the last answer " +
      "for the same generation, else `Unknown`; `UpToDate` whether the resource has the create-only values the " +
      "spec asks for now.",
    "### Reasons",
    ["| Reason | Meaning |", "| --- | --- |", ...reasonRows].join("\n"),
    "## Annotations",
    ["| Annotation | Effect |", "| --- | --- |", ...annotationRows].join("\n"),
  ];
  return `${sections.join("\n\n")}\n`;
}
