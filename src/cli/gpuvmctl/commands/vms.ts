// vms list|get|start|stop|reset|delete
import { VM_TYPES, type Vm, vmTypeInfoOf } from "../../../cloud/wire.ts";
import { age, findVm } from "../lookup.ts";
import { formatUsd, orDash, paintState } from "../output.ts";
import { resourceGroup } from "../resource-commands.ts";

function addressOf(vm: Vm, kind: "public_ipv4" | "private_ipv4"): string {
  for (const nic of vm.network_interfaces) for (const ip of nic.ips) if (ip[kind].address) return ip[kind].address;
  return "";
}

function priceOf(type: string): string {
  const info = vmTypeInfoOf(type);
  return info === undefined ? "-" : formatUsd(info.hourlyPriceUsd);
}

const shortState = (state: string) => state.replace(/^STATE_/, "");
const stateFilter = (state: string) => `STATE_${shortState(state.toUpperCase())}`;

export const VMS_COMMAND = resourceGroup<Vm>(
  {
    group: "vms",
    what: "VM",
    family: "vm",
    summary: "VMs",
    listFlags: [
      {
        name: "state",
        type: "string",
        multiple: true,
        placeholder: "state",
        description: "only these states (RUNNING, STOPPED, ...)",
      },
      {
        name: "type",
        type: "string",
        multiple: true,
        placeholder: "type",
        description: "only these types",
        choices: VM_TYPES,
      },
      {
        name: "location",
        type: "string",
        multiple: true,
        placeholder: "location",
        description: "only these locations",
      },
    ],
    async list(ctx, input) {
      const query = {
        ...(input.list("state").length > 0 ? { states: input.list("state").map(stateFilter) } : {}),
        ...(input.list("type").length > 0 ? { types: input.list("type") } : {}),
        ...(input.list("location").length > 0 ? { locations: input.list("location") } : {}),
      };
      const vms: Vm[] = [];
      for await (const vm of (await ctx.client()).vms.listAll(await ctx.projectId(), query)) vms.push(vm);
      return vms;
    },
    find: findVm,
    columns: (now) => [
      { header: "NAME", value: (v) => v.name },
      { header: "ID", value: (v) => v.id },
      { header: "TYPE", value: (v) => v.type },
      { header: "STATE", value: (v) => shortState(v.state), paint: (s) => paintState(s) },
      { header: "LOCATION", value: (v) => v.location },
      { header: "PUBLIC-IP", value: (v) => orDash(addressOf(v, "public_ipv4")) },
      { header: "$/HOUR", value: (v) => priceOf(v.type), align: "right" },
      { header: "AGE", value: (v) => age(v.created_at, now), align: "right" },
    ],
    details: (vm, ctx) => [
      ["Name", vm.name],
      ["ID", vm.id],
      ["Type", vm.type],
      ["State", ctx.out.paint(shortState(vm.state), paintState(vm.state) ?? "dim")],
      ["Location", vm.location],
      ["Public IP", orDash(addressOf(vm, "public_ipv4"))],
      ["Private IP", orDash(addressOf(vm, "private_ipv4"))],
      ["SSH", orDash(vm.ssh_destination)],
      ["Disks", orDash(vm.disks.map((d) => `${d.name} (${d.size}, ${d.attachment_type})`).join(", "))],
      ["Price", `${priceOf(vm.type)}/hour`],
      ["Created", vm.created_at],
    ],
    remove: {
      summary: "terminate a VM (its boot disk goes with it; data disks are detached, never deleted)",
      details: "A VM managed by a GpuVm comes back: delete the GpuVm instead (kubectl delete gvm <name>).",
      call: (client, projectId, id) => client.vms.terminate(projectId, id),
    },
  },
  [
    { name: "start", summary: "start a stopped VM", call: (client, p, vm) => client.vms.start(p, vm.id) },
    {
      name: "stop",
      summary: "stop a running VM (a stopped VM accrues no GPU-hours)",
      call: (client, p, vm) => client.vms.stop(p, vm.id),
    },
    { name: "reset", summary: "reset (hard-reboot) a running VM", call: (client, p, vm) => client.vms.reset(p, vm.id) },
  ],
);
