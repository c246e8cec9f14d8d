// GpuCluster: Cluster API's infrastructure cluster (contract v1beta2) for this cloud: the locations a cluster's
// machines may run in (its failure domains, those with capacity in status), the credentials its machines use,
// the control plane endpoint when the user provides one, and, where the spec asks, a network and firewall rules.
import { z } from "zod";
import {
  CLUSTER_COLUMN,
  INFRASTRUCTURE_COLUMNS,
  infrastructureKindOptions,
  infrastructureStatusShape,
} from "./cluster-api.ts";
import { CredentialsRef, DEFAULT_CREDENTIALS_SECRET } from "./common.ts";
import { type CelRule, countSet, exactlyOneOf, immutable, immutableOnceSet, matching, text } from "./fields.ts";
import { GpuFirewallRuleSpec } from "./gpu-firewall-rule.ts";
import { cidr } from "./gpu-network.ts";
import { GpuVmSpec } from "./gpu-vm.ts";
import { defineKind } from "./kind-info.ts";

export const MAX_CLUSTER_FIREWALL_RULES = 16;
export const MAX_FAILURE_DOMAINS = 100;
const MAX_FAILURE_DOMAIN_ATTRIBUTES = 16;
export const FIREWALL_RULE_NAME_PATTERN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

export const ApiEndpoint = z
  .object({
    host: z.string().min(1).max(512).meta({ description: "Host name or IP address the API server is served on." }),
    port: z.int().min(1).max(65535).meta({ description: "Port the API server is served on." }),
  })
  .meta({ description: "A Kubernetes API endpoint (Cluster API's APIEndpoint)." });

const NETWORK_FIELDS = ["id", "cidr"] as const;

export const ClusterNetwork = z
  .object({
    id: text("Id of an existing cloud network, such as the project's default network (VMs join it).", 128).optional(),
    cidr: cidr(
      "IPv4 range of a network made for the cluster (a GpuNetwork named after the cluster, deleted with it).",
    ).optional(),
  })
  .superRefine((network, ctx) => {
    if (countSet(network, NETWORK_FIELDS) !== 1)
      ctx.addIssue({ code: "custom", message: "set exactly one of id and cidr" });
  })
  .meta({
    description:
      "The network the cluster's firewall rules apply to. The cloud puts every VM on its project's default " +
      "network: rules meant for the machines' traffic name that network's id.",
    "x-kubernetes-validations": [exactlyOneOf(NETWORK_FIELDS, "set exactly one of id and cidr")],
  });

const ruleShape = GpuFirewallRuleSpec.shape;

export const ClusterFirewallRule = z
  .object({
    name: matching(
      z.string().min(1).max(20),
      FIREWALL_RULE_NAME_PATTERN,
      "must be a name such as apiserver: lowercase letters, digits and '-', starting and ending with a letter or digit",
    ).meta({ description: "Name of the rule in the cluster: the GpuFirewallRule is named <cluster>-<name>." }),
    direction: ruleShape.direction,
    action: ruleShape.action,
    protocols: ruleShape.protocols,
    sources: ruleShape.sources,
    destinations: ruleShape.destinations,
    sourcePorts: ruleShape.sourcePorts,
    destinationPorts: ruleShape.destinationPorts,
  })
  .meta({ description: "A firewall rule of the cluster, on its network (fields as a GpuFirewallRule's)." });

const specRules: readonly CelRule[] = [
  {
    ...immutableOnceSet("controlPlaneEndpoint"),
    message: "controlPlaneEndpoint cannot change once set (Cluster API copies it to the Cluster, where it is fixed)",
  },
  immutable("network", "create a new GpuCluster for another network"),
  {
    rule: "!has(self.firewallRules) || has(self.network)",
    message: "firewallRules need a network: set network.id (an existing network) or network.cidr",
    fieldPath: ".firewallRules",
  },
];

export const GpuClusterSpec = z
  .object({
    controlPlaneEndpoint: ApiEndpoint.optional().meta({
      description:
        "Where the cluster's API server is reached, when you provide it (a DNS name or address in front of the " +
        "control plane machines); otherwise the control plane provider sets the Cluster's. Cannot change once set.",
    }),
    locations: GpuVmSpec.shape.locations.unwrap().meta({
      description:
        "The locations the cluster's machines may run in, in order of preference: its failure domains (those " +
        "where the cloud offers VMs are listed in status.failureDomains).",
      "x-kubernetes-list-type": "set",
    }),
    credentialsRef: CredentialsRef.default({ name: DEFAULT_CREDENTIALS_SECRET }),
    network: ClusterNetwork.optional(),
    firewallRules: z
      .array(ClusterFirewallRule)
      .max(MAX_CLUSTER_FIREWALL_RULES)
      .refine((rules) => new Set(rules.map((rule) => rule.name)).size === rules.length, "rule names must not repeat")
      .optional()
      .meta({
        description:
          "Firewall rules made for the cluster on its network (GpuFirewallRules named <cluster>-<name>, deleted " +
          "with it).",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
      }),
  })
  .superRefine((spec, ctx) => {
    if (spec.firewallRules !== undefined && spec.network === undefined) {
      ctx.addIssue({
        code: "custom",
        path: ["firewallRules"],
        message: "firewallRules need a network: set network.id (an existing network) or network.cidr",
      });
    }
  })
  .meta({ description: "Desired state of the cluster's infrastructure.", "x-kubernetes-validations": specRules });
export type GpuClusterSpec = z.infer<typeof GpuClusterSpec>;

export const FailureDomain = z
  .object({
    name: text("The failure domain: a location, such as us-east1-a.", 256),
    controlPlane: z.boolean().optional().meta({ description: "Whether control plane machines may be placed in it." }),
    attributes: z
      .record(z.string().min(1).max(63), z.string().max(256).meta({ description: "The value." }))
      .optional()
      .meta({ description: "Attributes of the failure domain.", maxProperties: MAX_FAILURE_DOMAIN_ATTRIBUTES }),
  })
  .meta({ description: "A failure domain of the cluster (Cluster API's FailureDomain)." });

export const GpuClusterStatus = z
  .object({
    ...infrastructureStatusShape("cluster's infrastructure"),
    failureDomains: z
      .array(FailureDomain)
      .min(1)
      .max(MAX_FAILURE_DOMAINS)
      .optional()
      .meta({
        description:
          "spec.locations where the cloud offers VMs; Cluster API copies them to the Cluster (sorted by name) and " +
          "spreads a control plane's machines over them.",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
      }),
    networkId: text("Id of the cloud network the firewall rules apply to.", 128).optional(),
  })
  .meta({ description: "Observed state of the cluster's infrastructure." });
export type GpuClusterStatus = z.infer<typeof GpuClusterStatus>;

export const gpuClusterKind = defineKind({
  ...infrastructureKindOptions(true),
  kind: "GpuCluster",
  shortNames: ["gcluster"],
  description:
    "GpuCluster is Cluster API's infrastructure cluster in the GPU cloud: the locations (failure domains), " +
    "credentials, network and firewall rules of one Cluster.",
  spec: GpuClusterSpec,
  status: GpuClusterStatus,
  printerColumns: [
    CLUSTER_COLUMN,
    {
      name: "Endpoint",
      type: "string",
      jsonPath: ".spec.controlPlaneEndpoint.host",
      description: "Control plane endpoint host, when the GpuCluster provides it.",
    },
    {
      name: "Provisioned",
      type: "boolean",
      jsonPath: ".status.initialization.provisioned",
      description: "Whether the cluster's infrastructure is provisioned.",
    },
    ...INFRASTRUCTURE_COLUMNS,
  ],
});
export const GpuCluster = gpuClusterKind.schema;
export type GpuCluster = z.infer<typeof GpuCluster>;
