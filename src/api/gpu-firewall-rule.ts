// GpuFirewallRule: an allow/deny rule on a GpuNetwork.
import { z } from "zod";
import { FIREWALL_ACTIONS, FIREWALL_DIRECTIONS, FIREWALL_PROTOCOLS } from "../cloud/wire.ts";
import { CLUSTERCTL_CRD_LABELS } from "./cluster-api.ts";
import { managedSpecRules, managedSpecShape, managedStatusShape } from "./common.ts";
import {
  type CelRule,
  countSet,
  exactlyOneOf,
  immutable,
  localObjectReference,
  matching,
  text,
  whenMatching,
} from "./fields.ts";
import { cidr } from "./gpu-network.ts";
import { defineKind, MANAGED_COLUMNS } from "./kind-info.ts";

const PORT_NUMBER = "(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3})";
/** A port (`22`) or an inclusive range (`8000-9000`), 1–65535. */
export const PORT_OR_RANGE_PATTERN = new RegExp(`^${PORT_NUMBER}(-${PORT_NUMBER})?$`);
export const MAX_ENDPOINTS = 64;
const PORT_RANGE_BACKWARDS = "a port range must not end before it starts";
export const MAX_PORTS = 64;

const ENDPOINT_FIELDS = ["cidr", "vmRef", "resourceId"] as const;
const NETWORK_FIELDS = ["networkRef", "networkId"] as const;

export const FirewallEndpoint = z
  .object({
    cidr: cidr("An IPv4 range as a network address, such as 0.0.0.0/0 or 203.0.113.0/24.").optional(),
    vmRef: localObjectReference(
      "A GpuVm in the same namespace; the rule follows its cloud id.",
      "Name of the GpuVm.",
    ).optional(),
    resourceId: text("Id of a cloud resource (a VM) outside Kubernetes.", 128).optional(),
  })
  .superRefine((endpoint, ctx) => {
    if (countSet(endpoint, ENDPOINT_FIELDS) !== 1) {
      ctx.addIssue({ code: "custom", message: "set exactly one of cidr, vmRef and resourceId" });
    }
  })
  .meta({
    description: "One of: cidr, vmRef or resourceId.",
    "x-kubernetes-validations": [exactlyOneOf(ENDPOINT_FIELDS, "set exactly one of cidr, vmRef and resourceId")],
  });
export type FirewallEndpoint = z.infer<typeof FirewallEndpoint>;

function portList(description: string) {
  return z
    .array(
      matching(
        z.string().max(11),
        PORT_OR_RANGE_PATTERN,
        'must be a port from "1" to "65535", or a range such as "8000-9000"',
      ).meta({ description: 'A port ("22") or range ("8000-9000").' }),
    )
    .max(MAX_PORTS)
    .superRefine((ports, ctx) => {
      ports.forEach((port, index) => {
        const [low, high] = port.split("-").map(Number);
        if (low !== undefined && high !== undefined && low > high) {
          ctx.addIssue({ code: "custom", path: [index], message: PORT_RANGE_BACKWARDS });
        }
      });
    })
    .optional()
    .meta({
      description,
      "x-kubernetes-validations": [
        {
          // A malformed port has its own error: the range check reads only well-formed ones.
          rule: `self.all(p, ${whenMatching("p", PORT_OR_RANGE_PATTERN, "!p.contains('-') || int(p.substring(0, p.indexOf('-'))) <= int(p.substring(p.indexOf('-') + 1))")})`,
          message: PORT_RANGE_BACKWARDS,
        },
      ],
    });
}

function endpointList(description: string) {
  return z.array(FirewallEndpoint).max(MAX_ENDPOINTS).optional().meta({ description });
}

const specRules: readonly CelRule[] = [
  ...managedSpecRules,
  exactlyOneOf(NETWORK_FIELDS, "set exactly one of networkRef and networkId"),
  immutable("networkRef"),
  immutable("networkId"),
  immutable("direction"),
  immutable("action"),
];

export const GpuFirewallRuleSpec = z
  .object({
    ...managedSpecShape,
    networkRef: localObjectReference(
      "The GpuNetwork in the same namespace the rule belongs to.",
      "Name of the GpuNetwork.",
    ).optional(),
    networkId: text("Id of an existing cloud network the rule belongs to.", 128).optional(),
    direction: z.enum(FIREWALL_DIRECTIONS).meta({ description: "ingress or egress. Immutable." }),
    action: z.enum(FIREWALL_ACTIONS).meta({ description: "allow or deny. Immutable." }),
    protocols: z
      .array(z.enum(FIREWALL_PROTOCOLS).meta({ description: "tcp, udp or icmp." }))
      .min(1)
      .max(FIREWALL_PROTOCOLS.length)
      .refine((protocols) => new Set(protocols).size === protocols.length, "protocols must not repeat")
      .meta({ description: "Protocols the rule matches.", "x-kubernetes-list-type": "set" }),
    sources: endpointList("Where traffic comes from; empty means anywhere."),
    destinations: endpointList("Where traffic goes to; empty means anywhere."),
    sourcePorts: portList("Source ports; empty means all ports."),
    destinationPorts: portList("Destination ports; empty means all ports."),
  })
  .superRefine((spec, ctx) => {
    if (countSet(spec, NETWORK_FIELDS) !== 1) {
      ctx.addIssue({ code: "custom", message: "set exactly one of networkRef and networkId" });
    }
  })
  .meta({ description: "Desired state of the firewall rule.", "x-kubernetes-validations": specRules });
export type GpuFirewallRuleSpec = z.infer<typeof GpuFirewallRuleSpec>;

export const GpuFirewallRuleStatus = z
  .object({
    ...managedStatusShape,
    state: text("State of the rule as the cloud reports it.", 64).optional(),
    printableProtocols: text(
      "The protocols of the rule as the cloud reports them, comma-separated (tcp,udp), shown in the Protocols column.",
      64,
    ).optional(),
    networkId: text("Id of the cloud network the rule belongs to.", 128).optional(),
  })
  .meta({ description: "Observed state of the firewall rule." });
export type GpuFirewallRuleStatus = z.infer<typeof GpuFirewallRuleStatus>;

export const gpuFirewallRuleKind = defineKind({
  // A GpuMachine's GpuVm, a GpuCluster's network and rules move with their cluster (clusterctl move).
  crdLabels: CLUSTERCTL_CRD_LABELS,
  kind: "GpuFirewallRule",
  shortNames: ["gfw"],
  description: "GpuFirewallRule allows or denies traffic on a GpuNetwork, by protocol, endpoint and port.",
  spec: GpuFirewallRuleSpec,
  status: GpuFirewallRuleStatus,
  printerColumns: [
    { name: "Direction", type: "string", jsonPath: ".spec.direction", description: "ingress or egress." },
    { name: "Action", type: "string", jsonPath: ".spec.action", description: "allow or deny." },
    {
      name: "Protocols",
      type: "string",
      jsonPath: ".status.printableProtocols",
      description: "Matched protocols, as the cloud reports them.",
    },
    { name: "State", type: "string", jsonPath: ".status.state", description: "State in the cloud." },
    ...MANAGED_COLUMNS,
  ],
});
export const GpuFirewallRule = gpuFirewallRuleKind.schema;
export type GpuFirewallRule = z.infer<typeof GpuFirewallRule>;
