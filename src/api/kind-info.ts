// A kind's descriptor (KindInfo): its names, its object schema (the apiVersion/kind/metadata envelope, spec and
// status), its printer columns and its scale subresource; what the CRD generator, the validator and the reference
// documentation read. defineKind derives the names from the kind.
import { z } from "zod";
import { API_VERSION, CATEGORY, GROUP, ObjectMeta, VERSION } from "./common.ts";

export interface PrinterColumn {
  name: string;
  type: "string" | "integer" | "number" | "boolean" | "date";
  jsonPath: string;
  description: string;
  priority?: number;
}

export const READY_COLUMN: PrinterColumn = {
  name: "Ready",
  type: "string",
  jsonPath: '.status.conditions[?(@.type=="Ready")].status',
  description: "Status of the Ready condition.",
};
export const REASON_COLUMN: PrinterColumn = {
  name: "Reason",
  type: "string",
  jsonPath: '.status.conditions[?(@.type=="Ready")].reason',
  description: "Reason of the Ready condition.",
};
export const AGE_COLUMN: PrinterColumn = {
  name: "Age",
  type: "date",
  jsonPath: ".metadata.creationTimestamp",
  description: "Time since the object was created.",
};
export const ID_COLUMN: PrinterColumn = {
  name: "ID",
  type: "string",
  jsonPath: ".status.id",
  description: "Id of the cloud resource.",
  priority: 1,
};

export const SYNCED_COLUMN: PrinterColumn = {
  name: "Synced",
  type: "string",
  jsonPath: '.status.conditions[?(@.type=="Synced")].status',
  description: "Status of the Synced condition: whether the cloud resource is in step with the spec.",
};

/** The columns every managed kind ends with (after its own): Ready, Synced, Reason, ID, Age. */
export const MANAGED_COLUMNS: readonly PrinterColumn[] = [
  READY_COLUMN,
  SYNCED_COLUMN,
  REASON_COLUMN,
  ID_COLUMN,
  AGE_COLUMN,
];

export interface KindInfo<
  Schema extends z.ZodType = z.ZodType,
  SpecSchema extends z.ZodType = z.ZodType,
  StatusSchema extends z.ZodType = z.ZodType,
> {
  /** API group and version: gpucloud.dev/v1alpha1 unless the kind implements another project's contract. */
  group: string;
  version: string;
  /** `<group>/<version>`, the objects' apiVersion. */
  apiVersion: string;
  /** Labels of the CRD beyond the project's own (Cluster API's contract label, for instance). */
  crdLabels: Readonly<Record<string, string>>;
  kind: string;
  plural: string;
  singular: string;
  shortNames: readonly string[];
  listKind: string;
  categories: readonly string[];
  /** One paragraph: the CRD's top-level description (kubectl explain <kind>). */
  description: string;
  schema: Schema;
  specSchema: SpecSchema;
  statusSchema: StatusSchema;
  printerColumns: readonly PrinterColumn[];
  /** The scale subresource (kubectl scale, HorizontalPodAutoscaler), for kinds that have replicas. */
  scale?: ScaleSubresource;
}

/** JSON paths of the scale subresource: `.spec.replicas`, `.status.replicas` and a label-selector string. */
export interface ScaleSubresource {
  specReplicasPath: string;
  statusReplicasPath: string;
  labelSelectorPath?: string;
}

/** The apiVersion/kind/metadata envelope of a kind's object schema. */
export function objectEnvelope<K extends string>(kind: K, apiVersion: string = API_VERSION) {
  return {
    apiVersion: z.literal(apiVersion).default(apiVersion),
    kind: z.literal(kind).default(kind),
    metadata: ObjectMeta,
  };
}

/**
 * A kind's descriptor: its object schema (the envelope, `spec`, an optional `status`), its names (`GpuDisk` →
 * plural `gpudisks`, singular `gpudisk`, `GpuDiskList`) and the `gpucloud` category.
 */
export function defineKind<K extends string, Spec extends z.ZodType, Status extends z.ZodType>(options: {
  /** Default: gpucloud.dev. */
  group?: string;
  /** Default: v1alpha1. */
  version?: string;
  crdLabels?: Readonly<Record<string, string>>;
  kind: K;
  shortNames: readonly string[];
  description: string;
  spec: Spec;
  status: Status;
  printerColumns: readonly PrinterColumn[];
  scale?: ScaleSubresource;
  /** Default: the `gpucloud` category (`kubectl get gpucloud`). */
  categories?: readonly string[];
}) {
  const { kind, shortNames, description, spec, status, printerColumns, scale } = options;
  const group = options.group ?? GROUP;
  const version = options.version ?? VERSION;
  const apiVersion = `${group}/${version}`;
  const schema = z.object({ ...objectEnvelope(kind, apiVersion), spec, status: status.optional() });
  const singular = kind.toLowerCase();
  const info: KindInfo<typeof schema, Spec, Status> = {
    group,
    version,
    apiVersion,
    crdLabels: options.crdLabels ?? {},
    kind,
    plural: `${singular}s`,
    singular,
    shortNames,
    listKind: `${kind}List`,
    categories: options.categories ?? [CATEGORY],
    description,
    schema,
    specSchema: spec,
    statusSchema: status,
    printerColumns,
    ...(scale !== undefined ? { scale } : {}),
  };
  return info;
}
