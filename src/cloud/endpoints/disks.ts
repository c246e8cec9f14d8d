// The disk endpoints: create, list, read, resize and delete.
import { CreateDiskRequest, Disk, type Operation, ResizeDiskRequest } from "../wire.ts";
import {
  type Call,
  type CallOptions,
  listOf,
  projectGet,
  projectRoute,
  projectWrite,
  requireId,
  validateBody,
} from "./shared.ts";

const Disks = listOf(Disk);

export function diskEndpoints(call: Call) {
  return {
    async create(projectId: string, request: CreateDiskRequest, opts: CallOptions = {}): Promise<Operation> {
      const body = validateBody(CreateDiskRequest, request, "POST", projectRoute("/disks"));
      return projectWrite(call, "POST", projectId, "/disks", () => "disks", body, opts);
    },
    async list(projectId: string, opts: CallOptions = {}): Promise<Disk[]> {
      const { p, endpoint } = projectGet(projectId, "/disks", Disks, opts);
      return call({ ...endpoint, path: `projects/${p}/disks` });
    },
    async get(projectId: string, diskId: string, opts: CallOptions = {}): Promise<Disk> {
      const { p, route, endpoint } = projectGet(projectId, "/disks/:diskId", Disk, opts);
      return call({ ...endpoint, path: `projects/${p}/disks/${requireId(diskId, "diskId", "GET", route)}` });
    },
    async resize(projectId: string, diskId: string, size: string, opts: CallOptions = {}): Promise<Operation> {
      const route = projectRoute("/disks/:diskId");
      const body = validateBody(ResizeDiskRequest, { size }, "PATCH", route);
      const disk = requireId(diskId, "diskId", "PATCH", route);
      return projectWrite(call, "PATCH", projectId, "/disks/:diskId", () => `disks/${disk}`, body, opts);
    },
    async delete(projectId: string, diskId: string, opts: CallOptions = {}): Promise<Operation> {
      const disk = requireId(diskId, "diskId", "DELETE", projectRoute("/disks/:diskId"));
      return projectWrite(call, "DELETE", projectId, "/disks/:diskId", () => `disks/${disk}`, undefined, opts);
    },
  };
}
