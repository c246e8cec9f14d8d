// GpuNetwork: a VPC network that firewall rules attach to.
import { z } from "zod";
import { CIDR_PATTERN } from "../cloud/wire.ts";
import {
  type CelRule,
  defineKind,
  immutable,
  MANAGED_COLUMNS,
  managedSpecRules,
  managedSpecShape,
  managedStatusShape,
  text,
} from "./common.ts";

export const DEFAULT_NETWORK_CIDR = "10.0.0.0/16";

/** An IPv4 CIDR such as 10.0.0.0/16. */
export function cidr(description: string) {
  return z.string().max(18).regex(CIDR_PATTERN, "must be an IPv4 CIDR such as 10.0.0.0/16").meta({ description });
}

const specRules: readonly CelRule[] = [...managedSpecRules, immutable("cidr")];

export const GpuNetworkSpec = z
  .object({
    ...managedSpecShape,
    cidr: cidr("IPv4 address range of the network. Immutable.").default(DEFAULT_NETWORK_CIDR),
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
