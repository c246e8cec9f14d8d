// GpuNetwork: a VPC network that firewall rules attach to.
import { z } from "zod";
import { CIDR_PATTERN } from "../cloud/wire.ts";
import { CLUSTERCTL_CRD_LABELS } from "./cluster-api.ts";
import { managedSpecRules, managedSpecShape, managedStatusShape } from "./common.ts";
import { type CelRule, immutable, matching, text, whenMatching } from "./fields.ts";
import { defineKind, MANAGED_COLUMNS } from "./kind-info.ts";

export const DEFAULT_NETWORK_CIDR = "10.0.0.0/16";

const CIDR_EXPECTED = "must be an IPv4 CIDR such as 10.0.0.0/16";

/** The network address of an IPv4 CIDR (`10.0.0.1/8` → `10.0.0.0/8`); undefined when `text` is not one. */
export function maskedCidr(text: string): string | undefined {
  if (!CIDR_PATTERN.test(text)) return undefined;
  const [address = "", length = ""] = text.split("/");
  const bits = Number(length);
  const value = address.split(".").reduce((sum, octet) => sum * 256 + Number(octet), 0);
  const hostBits = 2 ** (32 - bits);
  const network = value - (value % hostBits);
  const octets = [24, 16, 8, 0].map((shift) => Math.floor(network / 2 ** shift) % 256);
  return `${octets.join(".")}/${bits}`;
}

/**
 * A CIDR with host bits set (10.0.0.1/8) names an address, not a network: refused with the network address in
 * the message. The CEL cidr library (Kubernetes 1.31+) computes it; checked only on a well-formed IPv4 CIDR.
 */
const NETWORK_ADDRESS_RULE: CelRule = {
  rule: whenMatching("self", CIDR_PATTERN, "cidr(self) == cidr(self).masked()"),
  message: "host bits are set: use the network address (such as 10.0.0.0/8 for 10.0.0.1/8)",
  // format(), not '+': the API server cannot bound the size of string(cidr) and refuses the concatenation's cost.
  messageExpression: "'host bits are set: use %s'.format([string(cidr(self).masked())])",
};

/** An IPv4 CIDR such as 10.0.0.0/16, without host bits set. */
export function cidr(description: string) {
  return matching(z.string().max(18), CIDR_PATTERN, CIDR_EXPECTED, [NETWORK_ADDRESS_RULE])
    .superRefine((value, ctx) => {
      const network = maskedCidr(value);
      if (network !== undefined && network !== value) {
        ctx.addIssue({ code: "custom", message: `host bits are set: use ${network}` });
      }
    })
    .meta({ description });
}

const specRules: readonly CelRule[] = [...managedSpecRules, immutable("cidr")];

export const GpuNetworkSpec = z
  .object({
    ...managedSpecShape,
    cidr: cidr(
      "IPv4 address range of the network, as a network address such as 10.0.0.0/16 (no host bits set). Immutable.",
    ).default(DEFAULT_NETWORK_CIDR),
  })
  .meta({ description: "Desired state of the network.", "x-kubernetes-validations": specRules });
export type GpuNetworkSpec = z.infer<typeof GpuNetworkSpec>;

export const GpuNetworkStatus = z
  .object({
    ...managedStatusShape,
    cidr: text("Address range as the cloud reports it.", 18).optional(),
    gateway: text("Gateway address of the network.", 64).optional(),
    subnets: z
      .array(text("A subnet of the network.", 64))
      .max(64)
      .optional()
      .meta({ description: "Subnets of the network." }),
  })
  .meta({ description: "Observed state of the network." });
export type GpuNetworkStatus = z.infer<typeof GpuNetworkStatus>;

export const gpuNetworkKind = defineKind({
  // A GpuMachine's GpuVm, a GpuCluster's network and rules move with their cluster (clusterctl move).
  crdLabels: CLUSTERCTL_CRD_LABELS,
  kind: "GpuNetwork",
  shortNames: ["gnet"],
  description: "GpuNetwork is a VPC network in the GPU cloud; GpuFirewallRules apply to it.",
  spec: GpuNetworkSpec,
  status: GpuNetworkStatus,
  printerColumns: [
    { name: "CIDR", type: "string", jsonPath: ".spec.cidr", description: "Address range." },
    ...MANAGED_COLUMNS,
  ],
});
export const GpuNetwork = gpuNetworkKind.schema;
export type GpuNetwork = z.infer<typeof GpuNetwork>;
