// disks list|get|resize|delete
import { type Disk, SIZE_PATTERN } from "../../../cloud/wire.ts";
import { UsageError } from "../errors.ts";
import { age } from "../lookup.ts";
import { orDash } from "../output.ts";
import { resourceGroup } from "../resource-commands.ts";

export const DISKS_COMMAND = resourceGroup<Disk>(
  {
    group: "disks",
    what: "disk",
    family: "disk",
    summary: "disks",
    list: async (ctx) => (await ctx.client()).disks.list(await ctx.projectId()),
    columns: (now) => [
      { header: "NAME", value: (d) => d.name },
      { header: "ID", value: (d) => d.id },
      { header: "TYPE", value: (d) => d.type },
      { header: "SIZE", value: (d) => d.size, align: "right" },
      { header: "LOCATION", value: (d) => d.location },
      { header: "ATTACHED-TO", value: (d) => orDash(d.attached_to.map((a) => `${a.vm_id}(${a.mode})`).join(",")) },
      { header: "AGE", value: (d) => age(d.created_at, now), align: "right" },
    ],
    details: (disk) => [
      ["Name", disk.name],
      ["ID", disk.id],
      ["Type", disk.type],
      ["Size", disk.size],
      ["Location", disk.location],
      ["Block size", String(disk.block_size)],
      ["Attached to", orDash(disk.attached_to.map((a) => `${a.vm_id} (${a.mode})`).join(", "))],
      ["Created", disk.created_at],
    ],
    remove: {
      summary: "delete a disk (it must be detached from every VM)",
      details: "A disk managed by a GpuDisk comes back: delete the GpuDisk instead.",
      call: (client, projectId, id) => client.disks.delete(projectId, id),
    },
  },
  [
    {
      name: "resize",
      summary: "grow a disk (never shrink): a whole number followed by GiB or TiB",
      args: "<size>",
      extraArgs: 1,
      check(input) {
        const size = input.arg(1);
        if (!SIZE_PATTERN.test(size))
          throw new UsageError(`size '${size}': expected a whole number followed by GiB or TiB`);
      },
      call: (client, projectId, disk, input) => client.disks.resize(projectId, disk.id, input.arg(1)),
    },
  ],
);
