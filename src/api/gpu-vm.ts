// GpuVm: a GPU virtual machine, its boot image, SSH access, scripts, attached disks and power state.
import { z } from "zod";
import { DISK_MODES, VM_TYPES } from "../cloud/wire.ts";
import { CLUSTERCTL_CRD_LABELS } from "./cluster-api.ts";
import {
  DEFAULT_CREDENTIALS_SECRET,
  managedSpecRules,
  managedSpecShape,
  managedStatusShape,
  SECRET_WATCH_SELECTOR,
} from "./common.ts";
import {
  atMostOneOf,
  type CelRule,
  countSet,
  DATA_KEY_EXPECTED,
  DATA_KEY_PATTERN,
  exactlyOneOf,
  immutable,
  LOCATION_EXPECTED,
  LOCATION_PATTERN,
  localObjectReference,
  matching,
  OBJECT_NAME_EXPECTED,
  OBJECT_NAME_PATTERN,
  text,
} from "./fields.ts";
import { AGE_COLUMN, defineKind, ID_COLUMN, READY_COLUMN, REASON_COLUMN, SYNCED_COLUMN } from "./kind-info.ts";

/** OpenSSH public key line: algorithm, base64 blob, optional comment. */
export const SSH_PUBLIC_KEY_PATTERN =
  /^(ssh-(rsa|ed25519)|ecdsa-sha2-nistp(256|384|521)|sk-(ssh-ed25519|ecdsa-sha2-nistp256)@openssh\.com) [A-Za-z0-9+/]+={0,3}( [^\r\n]*)?$/;
export const POWER_STATES = ["Running", "Stopped"] as const;
export const SCRIPT_SOURCE_KINDS = ["ConfigMap", "Secret"] as const;
export const MAX_LOCATIONS = 10;
export const MAX_VM_DISKS = 16;
/** status.lastResetRequestedAt holds at most this much of the reset annotation. */
export const MAX_RESET_VALUE_LENGTH = 64;
/**
 * Priorities order the objects waiting for room in a GpuBudget and for capacity of a (type, location): higher
 * first, then the earlier. Left out, a GpuVm (and a GpuVmPool's replica) has DEFAULT_PRIORITY.
 */
export const MIN_PRIORITY = -1000;
export const MAX_PRIORITY = 1000;
export const DEFAULT_PRIORITY = 0;
/** Startup and shutdown scripts are sent inline in the create request; keep them reasonable. */
export const MAX_SCRIPT_LENGTH = 65536;

/** Spec fields the cloud takes only in the create request (immutable; their Secret/ConfigMap values are watched). */
export const CREATE_ONLY_FIELDS = [
  "image",
  "sshPublicKey",
  "sshPublicKeySecretRef",
  "startupScript",
  "startupScriptRef",
  "shutdownScript",
  "shutdownScriptRef",
] as const;

function objectName(description: string) {
  return matching(z.string().min(1).max(253), OBJECT_NAME_PATTERN, OBJECT_NAME_EXPECTED).meta({ description });
}
function dataKey(description: string) {
  return matching(z.string().min(1).max(253), DATA_KEY_PATTERN, DATA_KEY_EXPECTED).meta({ description });
}

const location = matching(z.string().min(1).max(63), LOCATION_PATTERN, LOCATION_EXPECTED);

export const SecretKeyRef = z
  .object({
    name: objectName(`Name of the Secret; it must carry the label ${SECRET_WATCH_SELECTOR}.`),
    key: dataKey("Key in the Secret."),
  })
  .meta({ description: "A key of a Secret in the same namespace." });

export const ScriptRef = z
  .object({
    kind: z.enum(SCRIPT_SOURCE_KINDS).meta({ description: "ConfigMap or Secret." }),
    name: objectName(`Name of the ConfigMap or Secret (a Secret must carry the label ${SECRET_WATCH_SELECTOR}).`),
    key: dataKey("Key holding the script."),
  })
  .meta({ description: "A script stored in a ConfigMap or Secret of the same namespace." });

const DISK_SOURCE_FIELDS = ["diskRef", "id"] as const;

export const VmDiskAttachment = z
  .object({
    diskRef: localObjectReference("A GpuDisk in the same namespace.", "Name of the GpuDisk.").optional(),
    id: text("Id of an existing cloud disk.", 128).optional(),
    mode: z.enum(DISK_MODES).default("read-write").meta({ description: "read-write or read-only." }),
  })
  .superRefine((disk, ctx) => {
    if (countSet(disk, DISK_SOURCE_FIELDS) !== 1) {
      ctx.addIssue({ code: "custom", message: "set exactly one of diskRef and id" });
    }
  })
  .meta({
    description: "A data disk to attach: a GpuDisk reference or a cloud disk id.",
    "x-kubernetes-validations": [exactlyOneOf(DISK_SOURCE_FIELDS, "set exactly one of diskRef and id")],
  });
export type VmDiskAttachment = z.infer<typeof VmDiskAttachment>;

const CONNECTION_FIELDS = ["secretName", "configMapName"] as const;

export const ConnectionDetails = z
  .object({
    secretName: objectName("Secret to write the connection details to.").optional(),
    configMapName: objectName("ConfigMap to write the connection details to.").optional(),
  })
  .superRefine((details, ctx) => {
    if (countSet(details, CONNECTION_FIELDS) !== 1) {
      ctx.addIssue({ code: "custom", message: "set exactly one of secretName and configMapName" });
    }
  })
  .meta({
    description:
      "Where the operator writes host, user, port, sshDestination, publicIP and privateIP once the VM is Ready: a " +
      "Secret or ConfigMap it creates, owns and deletes with the GpuVm. One that exists and is not this GpuVm's is " +
      "never overwritten (NameConflict).",
    "x-kubernetes-validations": [exactlyOneOf(CONNECTION_FIELDS, "set exactly one of secretName and configMapName")],
  });

/** The family of the type (`a100-80gb.8x` → `a100-80gb`) in CEL. */
function celFamily(expr: string): string {
  return `${expr}.substring(0, ${expr}.lastIndexOf('.'))`;
}

/** A connection-details Secret named like the credentials would shadow them (written by the operator, it never is). */
const CONNECTION_SECRET_IS_CREDENTIALS =
  `connectionDetails.secretName must not be a credentials Secret (${DEFAULT_CREDENTIALS_SECRET} or credentialsRef.name): ` +
  "choose another name";

const specRules: readonly CelRule[] = [
  ...managedSpecRules,
  atMostOneOf(["location", "locations"], "set location or locations, not both"),
  {
    rule: "has(self.location) || has(self.locations) || has(self.id)",
    message: "set location or locations (or id to adopt an existing VM)",
  },
  atMostOneOf(["sshPublicKey", "sshPublicKeySecretRef"], "set sshPublicKey or sshPublicKeySecretRef, not both"),
  {
    rule: "has(self.sshPublicKey) || has(self.sshPublicKeySecretRef) || has(self.id)",
    message: "set sshPublicKey or sshPublicKeySecretRef (or id to adopt an existing VM)",
  },
  atMostOneOf(["startupScript", "startupScriptRef"], "set startupScript or startupScriptRef, not both"),
  atMostOneOf(["shutdownScript", "shutdownScriptRef"], "set shutdownScript or shutdownScriptRef, not both"),
  immutable("location"),
  immutable("locations"),
  // Values the cloud takes only in the create request: accepted and ignored would be a silent lie.
  ...CREATE_ONLY_FIELDS.map((field) =>
    immutable(
      field,
      "the cloud takes it only when it creates the VM; create a new GpuVm with the new value (or delete and re-create this one)",
    ),
  ),
  {
    rule: `${celFamily("self.type")} == ${celFamily("oldSelf.type")}`,
    message: "type can only change within its family (the part before the dot, e.g. a100-80gb.1x to a100-80gb.8x)",
    fieldPath: ".type",
  },
  {
    rule:
      "!has(self.connectionDetails) || !has(self.connectionDetails.secretName) || " +
      `(self.connectionDetails.secretName != '${DEFAULT_CREDENTIALS_SECRET}' && ` +
      "(!has(self.credentialsRef) || self.connectionDetails.secretName != self.credentialsRef.name))",
    message: CONNECTION_SECRET_IS_CREDENTIALS,
    fieldPath: ".connectionDetails",
  },
];

function isSet(value: unknown): boolean {
  return value !== undefined;
}

/**
 * The zod twin of the one-of rules on location, SSH key and scripts. A GpuVmPool's template has neither a
 * location (the placement gives it) nor an id: `withLocationAndId` is false there.
 */
export function refineVmInputs(
  spec: Record<string, unknown>,
  ctx: { addIssue(issue: { code: "custom"; path: string[]; message: string }): void },
  withLocationAndId: boolean,
): void {
  const pairs: [string, string, boolean][] = [
    ...(withLocationAndId ? [["location", "locations", false] as [string, string, boolean]] : []),
    ["sshPublicKey", "sshPublicKeySecretRef", false],
    ["startupScript", "startupScriptRef", true],
    ["shutdownScript", "shutdownScriptRef", true],
  ];
  const details = spec.connectionDetails as { secretName?: unknown } | undefined;
  const credentials = (spec.credentialsRef as { name?: unknown } | undefined)?.name;
  if (details?.secretName !== undefined && [DEFAULT_CREDENTIALS_SECRET, credentials].includes(details.secretName)) {
    ctx.addIssue({
      code: "custom",
      path: ["connectionDetails", "secretName"],
      message: CONNECTION_SECRET_IS_CREDENTIALS,
    });
  }
  for (const [inline, reference, optional] of pairs) {
    const count = countSet(spec, [inline, reference]);
    if (count > 1)
      ctx.addIssue({ code: "custom", path: [reference], message: `set ${inline} or ${reference}, not both` });
    if (count === 0 && !optional && !isSet(spec.id)) {
      const adopt = withLocationAndId ? " (or id to adopt an existing VM)" : "";
      ctx.addIssue({ code: "custom", path: [inline], message: `set ${inline} or ${reference}${adopt}` });
    }
  }
}

export const GpuVmSpec = z
  .object({
    ...managedSpecShape,
    type: z.enum(VM_TYPES).meta({
      description:
        "VM type: <family>.<gpus>x, such as a100-80gb.8x. Can change within its family (the part before the dot): a " +
        "running VM is stopped, updated and started again automatically (one step per operation). Another family " +
        "needs a new GpuVm.",
    }),
    location: location
      .optional()
      .meta({ description: "Location to create the VM in, such as us-east1-a. Immutable. Or use locations." }),
    locations: z
      .array(location.meta({ description: "A location." }))
      .min(1)
      .max(MAX_LOCATIONS)
      .refine((list) => new Set(list).size === list.length, "locations must not repeat")
      .optional()
      .meta({
        description:
          "Locations to try in order: the next one is tried when the previous has no capacity for the type; when " +
          "none has, the VM stalls as CapacityUnavailable and the walk starts again a minute later. Immutable.",
        "x-kubernetes-list-type": "set",
      }),
    image: text(
      "OS image name, such as ubuntu22.04-nvidia-550. The cloud's default image when empty. Immutable.",
    ).optional(),
    sshPublicKey: matching(
      z.string().max(16384),
      SSH_PUBLIC_KEY_PATTERN,
      "must be an OpenSSH public key line such as 'ssh-ed25519 AAAA... user@host'",
    )
      .optional()
      .meta({ description: "OpenSSH public key installed on the VM (ssh-ed25519 AAAA... user@host). Immutable." }),
    sshPublicKeySecretRef: SecretKeyRef.optional().meta({
      description:
        "A Secret key holding the SSH public key, instead of sshPublicKey. Immutable; a later change of the " +
        "Secret's value is not applied and shows as UpToDate=False.",
    }),
    startupScript: z
      .string()
      .max(MAX_SCRIPT_LENGTH)
      .optional()
      .meta({ description: "Script run when the VM boots. Or use startupScriptRef. Immutable." }),
    startupScriptRef: ScriptRef.optional().meta({
      description:
        "A ConfigMap or Secret key holding the startup script. Immutable; a later change of the value is not " +
        "applied and shows as UpToDate=False.",
    }),
    shutdownScript: z
      .string()
      .max(MAX_SCRIPT_LENGTH)
      .optional()
      .meta({ description: "Script run when the VM shuts down. Or use shutdownScriptRef. Immutable." }),
    shutdownScriptRef: ScriptRef.optional().meta({
      description:
        "A ConfigMap or Secret key holding the shutdown script. Immutable; a later change of the value is not " +
        "applied and shows as UpToDate=False.",
    }),
    disks: z
      .array(VmDiskAttachment)
      .max(MAX_VM_DISKS)
      .optional()
      .meta({
        description:
          "Data disks to attach: GpuDisks of this namespace (attached once Ready) or cloud disk ids. Adding or " +
          "removing an entry attaches or detaches the disk, running or stopped; the order does not matter.",
      }),
    powerState: z
      .enum(POWER_STATES)
      .default("Running")
      .meta({
        description:
          "Running or Stopped: the operator starts or stops the VM to match. A restart (RESET) is asked with the " +
          "gpucloud.dev/reset-requested-at annotation.",
      }),
    connectionDetails: ConnectionDetails.optional(),
    priority: z
      .int()
      .min(MIN_PRIORITY)
      .max(MAX_PRIORITY)
      .optional()
      .meta({
        description:
          `${MIN_PRIORITY} to ${MAX_PRIORITY}, default ${DEFAULT_PRIORITY}: the order among objects waiting for room ` +
          "in a GpuBudget or for capacity of the VM's type in its location: higher first, then the one waiting " +
          "longer. A GpuBudget's maxPriority caps it. Can change at any time.",
      }),
  })
  .superRefine((spec, ctx) => refineVmInputs(spec, ctx, true))
  .meta({ description: "Desired state of the VM.", "x-kubernetes-validations": specRules });
export type GpuVmSpec = z.infer<typeof GpuVmSpec>;

export const AttachedDiskStatus = z
  .object({
    id: text("Cloud id of the disk.", 128),
    name: text("Cloud name of the disk.", 128).optional(),
    mode: text("read-write or read-only.", 16).optional(),
    gpuDisk: text("Name of the GpuDisk of this namespace that manages the disk; empty for other disks.").optional(),
  })
  .meta({ description: "A data disk attached to the VM." });

export const GpuVmStatus = z
  .object({
    ...managedStatusShape,
    state: text("VM state as the cloud reports it (STATE_RUNNING, STATE_STOPPED, ...).", 64).optional(),
    printableState: text(
      "The VM state as the State column shows it: status.state without its STATE_ prefix (RUNNING, STOPPED, " +
        "PROVISIONING, ...).",
      64,
    ).optional(),
    type: text("VM type as the cloud reports it.", 64).optional(),
    location: text("Location the VM was created in.", 63).optional(),
    publicIP: text("Public IPv4 address.", 64).optional(),
    privateIP: text("Private IPv4 address.", 64).optional(),
    sshDestination: text("user@host to ssh into.", 320).optional(),
    hourlyPriceUSD: z.number().min(0).optional().meta({ description: "Price of the VM type in US dollars per hour." }),
    attachedDisks: z
      .array(AttachedDiskStatus)
      .max(MAX_VM_DISKS + 1)
      .optional()
      .meta({ description: "Data disks attached to the VM." }),
    // From the annotation, which users write by hand: no date-time format here.
    lastResetRequestedAt: text(
      "Value of the gpucloud.dev/reset-requested-at annotation last acted on (one RESET per new value); a value " +
        `longer than ${MAX_RESET_VALUE_LENGTH} characters is kept as its first characters and a hash.`,
      MAX_RESET_VALUE_LENGTH,
    ).optional(),
  })
  .meta({ description: "Observed state of the VM." });
export type GpuVmStatus = z.infer<typeof GpuVmStatus>;

export const gpuVmKind = defineKind({
  // A GpuMachine's GpuVm, a GpuCluster's network and rules move with their cluster (clusterctl move).
  crdLabels: CLUSTERCTL_CRD_LABELS,
  kind: "GpuVm",
  shortNames: ["gvm"],
  description: "GpuVm is a GPU virtual machine in the GPU cloud.",
  spec: GpuVmSpec,
  status: GpuVmStatus,
  printerColumns: [
    { name: "Type", type: "string", jsonPath: ".spec.type", description: "VM type." },
    { name: "Location", type: "string", jsonPath: ".status.location", description: "Location of the VM." },
    { name: "State", type: "string", jsonPath: ".status.printableState", description: "State in the cloud." },
    { name: "Public-IP", type: "string", jsonPath: ".status.publicIP", description: "Public IPv4 address." },
    READY_COLUMN,
    SYNCED_COLUMN,
    REASON_COLUMN,
    { name: "$/Hour", type: "number", jsonPath: ".status.hourlyPriceUSD", description: "Price per hour in USD." },
    {
      name: "Up-To-Date",
      type: "string",
      jsonPath: '.status.conditions[?(@.type=="UpToDate")].status',
      description: "False when an SSH key or script from a Secret/ConfigMap changed after the VM was created.",
      priority: 1,
    },
    ID_COLUMN,
    AGE_COLUMN,
  ],
});
export const GpuVm = gpuVmKind.schema;
export type GpuVm = z.infer<typeof GpuVm>;
