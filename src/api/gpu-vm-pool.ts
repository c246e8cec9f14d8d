// GpuVmPool: N identical GpuVms (and a GpuDisk per replica and disk template) made from one template, placed over
// an ordered list of locations, scaled through the scale subresource and replaced in rolls when the template
// changes. The pool owns Kubernetes objects only: its GpuVms and GpuDisks do the cloud work.
import { z } from "zod";
import { BLOCK_SIZES, DISK_MODES, DISK_TYPES, SIZE_PATTERN } from "../cloud/wire.ts";
import { DELETION_POLICIES, managedStatusShape, POOL_LABELS } from "./common.ts";
import { atMostOneOf, type CelRule, LOCATION_EXPECTED, LOCATION_PATTERN, matching, text, timestamp } from "./fields.ts";
import {
  PERSISTENT_SSD_MAX_GIB,
  SHARED_VOLUME_MAX_GIB,
  SHARED_VOLUME_MIN_GIB,
  SIZE_EXPECTED,
  sizeInGiB,
} from "./gpu-disk.ts";
import { CREATE_ONLY_FIELDS, GpuVmSpec, MAX_LOCATIONS, refineVmInputs } from "./gpu-vm.ts";
import { AGE_COLUMN, defineKind, REASON_COLUMN } from "./kind-info.ts";

export const PLACEMENT_STRATEGIES = ["Spread", "Pack"] as const;
export type PlacementStrategy = (typeof PLACEMENT_STRATEGIES)[number];
export const UPDATE_STRATEGY_TYPES = ["RollingReplace", "OnDelete"] as const;
export const PERSISTENT_DISK_POLICIES = ["Delete", "Retain"] as const;
export const MAX_POOL_REPLICAS = 128;
/** Slots the status can record: every replica plus the surge of a rolling replacement. */
export const MAX_POOL_SLOTS = 2 * MAX_POOL_REPLICAS;
/** A pool's name is a label value (63) and leaves room for `-<suffix>` in its GpuVms' names. */
export const POOL_SUFFIX_LENGTH = 5;
export const MAX_POOL_NAME_LENGTH = 63 - POOL_SUFFIX_LENGTH - 1;
export const MAX_DISK_TEMPLATES = 4;
export const MAX_DISK_TEMPLATE_NAME_LENGTH = 20;
const MAX_TEMPLATE_LABELS = 32;

/** The GpuVm fields a template carries: all but the identity (cloudName, id), the location and the per-VM outputs. */
const TEMPLATE_FIELDS = [
  "credentialsRef",
  "deletionPolicy",
  "type",
  ...CREATE_ONLY_FIELDS,
  "disks",
  "powerState",
  "priority",
] as const;

const vmShape = GpuVmSpec.shape;
const templateShape = Object.fromEntries(TEMPLATE_FIELDS.map((field) => [field, vmShape[field]])) as Pick<
  typeof vmShape,
  (typeof TEMPLATE_FIELDS)[number]
>;

const templateSpecRules: readonly CelRule[] = [
  atMostOneOf(["sshPublicKey", "sshPublicKeySecretRef"], "set sshPublicKey or sshPublicKeySecretRef, not both"),
  {
    rule: "has(self.sshPublicKey) || has(self.sshPublicKeySecretRef)",
    message: "set sshPublicKey or sshPublicKeySecretRef",
  },
  atMostOneOf(["startupScript", "startupScriptRef"], "set startupScript or startupScriptRef, not both"),
  atMostOneOf(["shutdownScript", "shutdownScriptRef"], "set shutdownScript or shutdownScriptRef, not both"),
];

export const PoolTemplateSpec = z
  .object(templateShape)
  .superRefine((spec, ctx) => refineVmInputs(spec, ctx, false))
  .meta({
    description:
      "The GpuVm spec of every replica, without cloudName, id, location(s), managementPolicy and " +
      "connectionDetails: the pool names and places each replica. type (within its family), powerState and " +
      "priority are changed in place; the other fields are create-only and replace the replicas in a roll.",
    "x-kubernetes-validations": templateSpecRules,
  });
export type PoolTemplateSpec = z.infer<typeof PoolTemplateSpec>;

/** Labels or annotations given to the objects made from a template. */
export const labelMap = (description: string, maxValueLength: number) =>
  z
    .record(z.string().min(1).max(317), z.string().max(maxValueLength).meta({ description: "The value." }))
    .optional()
    .meta({ description, maxProperties: MAX_TEMPLATE_LABELS });

export const PoolTemplate = z
  .object({
    metadata: z
      .object({
        labels: labelMap(
          `Labels of every replica (the pool adds ${POOL_LABELS.pool} and ${POOL_LABELS.revision}).`,
          63,
        ),
        annotations: labelMap(
          "Annotations of every replica (gpucloud.dev/sync-period and gpucloud.dev/paused work as on a GpuVm).",
          4096,
        ),
      })
      .superRefine((metadata, ctx) => {
        if (Object.keys(metadata.labels ?? {}).some((key) => key.startsWith("gpucloud.dev/pool")))
          ctx.addIssue({
            code: "custom",
            path: ["labels"],
            message: "labels starting with gpucloud.dev/pool are set by the pool",
          });
      })
      .optional()
      .meta({
        description: "Labels and annotations of every replica; changes are applied to the replicas in place.",
        "x-kubernetes-validations": [
          {
            rule: `!has(self.labels) || !self.labels.exists(key, key.startsWith('gpucloud.dev/pool'))`,
            message: "labels starting with gpucloud.dev/pool are set by the pool",
            fieldPath: ".labels",
          },
        ],
      }),
    spec: PoolTemplateSpec,
  })
  .meta({ description: "What every replica is made from." });

export const DiskTemplate = z
  .object({
    name: matching(
      z.string().min(1).max(MAX_DISK_TEMPLATE_NAME_LENGTH),
      /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/,
      "must be a name such as scratch: lowercase letters, digits and '-', starting and ending with a letter or digit",
    ).meta({ description: "Name of the disk in its replica: the GpuDisk is named <replica>-<name>." }),
    size: matching(z.string().max(16), SIZE_PATTERN, SIZE_EXPECTED).meta({
      description: "Size, as for a GpuDisk (512GiB, 1TiB).",
    }),
    type: z.enum(DISK_TYPES).default("persistent-ssd").meta({ description: "persistent-ssd or shared-volume." }),
    blockSize: z.literal(BLOCK_SIZES).default(4096).meta({ description: "Block size in bytes: 512 or 4096." }),
    mode: z.enum(DISK_MODES).default("read-write").meta({ description: "How the replica attaches it." }),
  })
  .superRefine((disk, ctx) => {
    const gib = sizeInGiB(disk.size);
    if (gib === undefined) return;
    if (disk.type === "persistent-ssd" && gib > PERSISTENT_SSD_MAX_GIB)
      ctx.addIssue({ code: "custom", path: ["size"], message: "a persistent-ssd disk is at most 10TiB" });
    if (
      disk.type === "shared-volume" &&
      (gib % 1024 !== 0 || gib < SHARED_VOLUME_MIN_GIB || gib > SHARED_VOLUME_MAX_GIB)
    )
      ctx.addIssue({ code: "custom", path: ["size"], message: "a shared-volume disk is 1TiB to 1000TiB in whole TiB" });
  })
  .meta({
    description:
      "A GpuDisk made for every replica in its location once the replica's VM holds a place (its create " +
      "succeeded: a VM waiting for capacity has none), then attached to it, running (after template.spec.disks): " +
      "a startup script that needs it waits for the device. Create-only: a change replaces the replicas.",
  });
export type DiskTemplate = z.infer<typeof DiskTemplate>;

const location = matching(z.string().min(1).max(63), LOCATION_PATTERN, LOCATION_EXPECTED);

export const Placement = z
  .object({
    locations: z
      .array(location.meta({ description: "A location, such as us-east1-a." }))
      .min(1)
      .max(MAX_LOCATIONS)
      .refine((list) => new Set(list).size === list.length, "locations must not repeat")
      .meta({
        description:
          "Locations the replicas may run in, in order of preference. A replica outside the list is replaced.",
        "x-kubernetes-list-type": "set",
      }),
    strategy: z
      .enum(PLACEMENT_STRATEGIES)
      .default("Spread")
      .meta({
        description:
          "Spread: each new replica goes to the location with room that has the fewest replicas. Pack: to the " +
          "first location with room. Room is the cloud's count of free VMs where its availability endpoint gives " +
          "one; where it only says yes, replicas go in growing batches (at least 8 starting at once, at most as " +
          "many as already run there). A location where a replica's create failed out of stock takes none for the " +
          "capacity retry period (the replica is moved when another location has room, else it waits there).",
      }),
  })
  .meta({ description: "Where the replicas run." });
export type Placement = z.infer<typeof Placement>;

export const UpdateStrategy = z
  .object({
    type: z
      .enum(UPDATE_STRATEGY_TYPES)
      .default("RollingReplace")
      .meta({
        description:
          "RollingReplace: replicas whose create-only fields are out of date are replaced, and changeable fields " +
          "are changed in place, within maxUnavailable and maxSurge. OnDelete: existing replicas are left alone; " +
          "a replica you delete comes back from the current template.",
      }),
    maxUnavailable: z
      .int()
      .min(0)
      .max(MAX_POOL_REPLICAS)
      .default(1)
      .meta({
        description:
          "At most this many replicas below spec.replicas may be not Ready because of the update (an in-place " +
          "change takes at least one at a time).",
      }),
    maxSurge: z.int().min(0).max(MAX_POOL_REPLICAS).default(0).meta({
      description: "At most this many replicas above spec.replicas may exist while replacing (GPUs are scarce).",
    }),
  })
  .meta({
    description: "How template changes reach existing replicas.",
    "x-kubernetes-validations": [
      {
        rule: "self.type == 'OnDelete' || self.maxUnavailable + self.maxSurge >= 1",
        message: "maxUnavailable and maxSurge cannot both be 0",
      },
    ],
  });
export type UpdateStrategy = z.infer<typeof UpdateStrategy>;

export const GpuVmPoolSpec = z
  .object({
    replicas: z
      .int()
      .min(0)
      .max(MAX_POOL_REPLICAS)
      .default(1)
      .meta({ description: "How many replicas (GpuVms) the pool keeps. kubectl scale changes it." }),
    template: PoolTemplate,
    diskTemplates: z
      .array(DiskTemplate)
      .max(MAX_DISK_TEMPLATES)
      .optional()
      .meta({
        description: "Data disks made for every replica.",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
      }),
    persistentDiskPolicy: z
      .enum(PERSISTENT_DISK_POLICIES)
      .default("Delete")
      .meta({
        description:
          "What happens to a replica's disks when the replica is removed (scale-down, replacement, pool deletion): " +
          "Delete them, or Retain them (the GpuDisks stay, without owner and pool label).",
      }),
    placement: Placement,
    updateStrategy: UpdateStrategy.default({ type: "RollingReplace", maxUnavailable: 1, maxSurge: 0 }),
    deletionPolicy: z
      .enum(DELETION_POLICIES)
      .default("Delete")
      .meta({
        description:
          "What happens to the replicas when the pool is deleted: Delete them through the operator (each " +
          "GpuVm's own deletionPolicy decides about its cloud VM), or Orphan them (their owner references are " +
          "removed; a new pool of the same name adopts them).",
      }),
  })
  .superRefine((spec, ctx) => {
    const names = (spec.diskTemplates ?? []).map((disk) => disk.name);
    if (new Set(names).size !== names.length)
      ctx.addIssue({ code: "custom", path: ["diskTemplates"], message: "disk template names must not repeat" });
    const strategy = spec.updateStrategy;
    if (strategy.type === "RollingReplace" && strategy.maxUnavailable + strategy.maxSurge < 1)
      ctx.addIssue({
        code: "custom",
        path: ["updateStrategy"],
        message: "maxUnavailable and maxSurge cannot both be 0",
      });
  })
  .meta({ description: "Desired state of the pool." });
export type GpuVmPoolSpec = z.infer<typeof GpuVmPoolSpec>;

export const PoolSlot = z
  .object({
    name: text("Name of the replica's GpuVm.", 253),
    location: text("Location the replica was placed in.", 63),
    revision: text("Template revision the replica was made from.", 16),
    recordedAt: timestamp("When the slot was recorded (before the GpuVm was created)."),
  })
  .meta({
    description:
      "A replica the pool has decided on, recorded before its GpuVm is created: after a crash the pool creates " +
      "exactly the recorded GpuVms, never a second one for the same replica.",
  });
export type PoolSlot = z.infer<typeof PoolSlot>;

export const LocationCount = z
  .object({
    name: text("The location.", 63),
    replicas: z.int().min(0).meta({ description: "Replicas placed there (not waiting for capacity)." }),
    readyReplicas: z.int().min(0).meta({ description: "Ready replicas there." }),
  })
  .meta({ description: "Replicas per location." });

const count = (description: string) => z.int().min(0).optional().meta({ description });

export const GpuVmPoolStatus = z
  .object({
    observedGeneration: managedStatusShape.observedGeneration,
    conditions: managedStatusShape.conditions,
    replicas: count(
      "Replicas that have a place: the pool's GpuVms (created or being created, not being deleted) that do not " +
        "wait for capacity. replicas + pendingReplicas = spec.replicas once a scale has settled (plus maxSurge " +
        "while replacing).",
    ),
    readyReplicas: count("Replicas whose GpuVm is Ready with the pool's disks attached."),
    updatedReplicas: count("Replicas made from the current template, with its changeable fields applied."),
    availableReplicas: count("Replicas that are both Ready and up to date."),
    pendingReplicas: count(
      "Replicas asked for that have no place for lack of capacity: GpuVms whose create found none (they wait, " +
        "without disks) and replicas no location has room for (no GpuVm made). Not counted in replicas.",
    ),
    selector: text(
      "Label selector of the replicas, for the scale subresource (HorizontalPodAutoscaler).",
      320,
    ).optional(),
    currentRevision: text("Revision (hash) of the current template's create-only fields.", 16).optional(),
    locations: z
      .array(LocationCount)
      .max(MAX_LOCATIONS * 2)
      .optional()
      .meta({
        description: "Replicas per location.",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
      }),
    locationSummary: text("Replicas per location as text (location=count, ...), for kubectl get.", 1024).optional(),
    hourlyPriceUSD: z
      .number()
      .min(0)
      .optional()
      .meta({ description: "Total price per hour of the replicas' VMs in US dollars." }),
    slots: z
      .array(PoolSlot)
      .max(MAX_POOL_SLOTS)
      .optional()
      .meta({ description: "The replicas the pool has decided on (write-ahead record)." }),
    lastError: text("The last error met while reconciling, empty once resolved.", 4096).optional(),
  })
  .meta({ description: "Observed state of the pool." });
export type GpuVmPoolStatus = z.infer<typeof GpuVmPoolStatus>;

export const gpuVmPoolKind = defineKind({
  kind: "GpuVmPool",
  shortNames: ["gpool"],
  description:
    "GpuVmPool keeps N identical GpuVms (and their GpuDisks) made from one template, spread or packed over " +
    "locations with capacity, scaled with kubectl scale and replaced in rolls when the template changes.",
  spec: GpuVmPoolSpec,
  status: GpuVmPoolStatus,
  printerColumns: [
    { name: "Desired", type: "integer", jsonPath: ".spec.replicas", description: "Replicas asked for." },
    { name: "Ready", type: "integer", jsonPath: ".status.readyReplicas", description: "Ready replicas." },
    {
      name: "Up-To-Date",
      type: "integer",
      jsonPath: ".status.updatedReplicas",
      description: "Replicas made from the current template.",
    },
    {
      name: "Locations",
      type: "string",
      jsonPath: ".status.locationSummary",
      description: "Replicas per location.",
    },
    { name: "$/Hour", type: "number", jsonPath: ".status.hourlyPriceUSD", description: "Total price per hour in USD." },
    REASON_COLUMN,
    {
      name: "Pending",
      type: "integer",
      jsonPath: ".status.pendingReplicas",
      description: "Replicas without a place for lack of capacity.",
      priority: 1,
    },
    {
      name: "Revision",
      type: "string",
      jsonPath: ".status.currentRevision",
      description: "Current template revision.",
      priority: 1,
    },
    AGE_COLUMN,
  ],
  scale: {
    specReplicasPath: ".spec.replicas",
    statusReplicasPath: ".status.replicas",
    labelSelectorPath: ".status.selector",
  },
});
export const GpuVmPool = gpuVmPoolKind.schema;
export type GpuVmPool = z.infer<typeof GpuVmPool>;
