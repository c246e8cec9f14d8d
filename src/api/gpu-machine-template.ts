// GpuMachineTemplate: what Cluster API makes the GpuMachines of a MachineDeployment (or a control plane) from,
// and, in its status, what a machine of it offers (capacity, node info), which the cluster-autoscaler's Cluster
// API provider reads to scale a MachineDeployment up from zero.
import { z } from "zod";
import { CLUSTER_COLUMN, infrastructureKindOptions } from "./cluster-api.ts";
import { matching } from "./fields.ts";
import { machineVmRules, machineVmShape } from "./gpu-machine.ts";
import { refineVmInputs } from "./gpu-vm.ts";
import { labelMap } from "./gpu-vm-pool.ts";
import { AGE_COLUMN, defineKind } from "./kind-info.ts";

/** A Kubernetes quantity (resource.Quantity's serialised form): 8, 500m, 64Gi, 1.5e3. */
export const QUANTITY_PATTERN =
  /^[+-]?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE][+-]?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$/;
export const NODE_ARCHITECTURES = ["amd64", "arm64", "s390x", "ppc64le"] as const;
const MAX_CAPACITY_ENTRIES = 16;

export const GpuMachineTemplateResource = z
  .object({
    metadata: z
      .object({
        labels: labelMap("Labels of every GpuMachine made from the template.", 63),
        annotations: labelMap("Annotations of every GpuMachine made from the template.", 4096),
      })
      .optional()
      .meta({ description: "Labels and annotations Cluster API puts on every GpuMachine it makes." }),
    spec: z
      .object(machineVmShape)
      .superRefine((spec, ctx) => refineVmInputs(spec, ctx, false))
      .meta({
        description:
          "The spec of every GpuMachine made from the template (providerID and failureDomain are per machine).",
        "x-kubernetes-validations": machineVmRules,
      }),
  })
  .meta({ description: "What every GpuMachine is made from." });

export const GpuMachineTemplateSpec = z.object({ template: GpuMachineTemplateResource }).meta({
  description: "The template.",
  "x-kubernetes-validations": [
    {
      rule: "self.template == oldSelf.template",
      message:
        "spec.template is immutable: create a new GpuMachineTemplate and point the MachineDeployment's " +
        "infrastructureRef at it (Cluster API then rolls the machines)",
    },
  ],
});
export type GpuMachineTemplateSpec = z.infer<typeof GpuMachineTemplateSpec>;

const quantity = matching(z.string().max(64), QUANTITY_PATTERN, "must be a quantity such as 8, 500m or 64Gi").meta({
  description: "A quantity.",
});

export const GpuMachineTemplateStatus = z
  .object({
    capacity: z
      .record(z.string().min(1).max(317), quantity)
      .optional()
      .meta({
        description:
          "What a machine of the template offers (cpu, memory, nvidia.com/gpu), from the cloud's specs of the " +
          "VM type: the cluster-autoscaler's Cluster API provider reads it to scale up from zero.",
        maxProperties: MAX_CAPACITY_ENTRIES,
      }),
    nodeInfo: z
      .object({
        architecture: z
          .enum(NODE_ARCHITECTURES)
          .optional()
          .meta({ description: "CPU architecture of the node: amd64, arm64, s390x or ppc64le." }),
        operatingSystem: z
          .string()
          .max(64)
          .optional()
          .meta({ description: "Operating system of the node, such as linux." }),
      })
      .optional()
      .meta({ description: "Architecture and operating system of a node of the template.", minProperties: 1 }),
  })
  .meta({ description: "What a machine of the template offers (for autoscaling from zero)." });
export type GpuMachineTemplateStatus = z.infer<typeof GpuMachineTemplateStatus>;

export const gpuMachineTemplateKind = defineKind({
  ...infrastructureKindOptions(false),
  kind: "GpuMachineTemplate",
  shortNames: ["gmt"],
  description:
    "GpuMachineTemplate is what Cluster API makes GpuMachines from (a MachineDeployment's or control plane's " +
    "infrastructureRef); its status says what a machine of it offers, for autoscaling from zero.",
  spec: GpuMachineTemplateSpec,
  status: GpuMachineTemplateStatus,
  printerColumns: [
    CLUSTER_COLUMN,
    { name: "Type", type: "string", jsonPath: ".spec.template.spec.type", description: "VM type." },
    {
      name: "GPUs",
      type: "string",
      jsonPath: ".status.capacity['nvidia\\.com/gpu']",
      description: "GPUs of a machine (status.capacity).",
    },
    AGE_COLUMN,
  ],
});
export const GpuMachineTemplate = gpuMachineTemplateKind.schema;
export type GpuMachineTemplate = z.infer<typeof GpuMachineTemplate>;
