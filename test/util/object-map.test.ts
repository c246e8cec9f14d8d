// ObjectMap: a value per (kind, namespace, name), its maps pruned with their last object.
import { describe, expect, it } from "vitest";
import { ObjectMap } from "../../src/util/object-map.ts";

describe("ObjectMap", () => {
  it("keeps one value per kind, namespace and name, and counts them", () => {
    const map = new ObjectMap<number>();
    map.set("GpuVm", "a", "x", 1);
    map.set("GpuVm", "a", "x", 2);
    map.set("GpuVm", "b", "x", 3);
    map.set("GpuDisk", "a", "x", 4);
    expect(map.size).toBe(3);
    expect([map.get("GpuVm", "a", "x"), map.get("GpuVm", "b", "x"), map.get("GpuDisk", "a", "x")]).toEqual([2, 3, 4]);
    expect(map.get("GpuVm", "c", "x")).toBeUndefined();
    // A slash in no part can make two objects one ("a/b" + "c" against "a" + "b/c" in a joined key).
    map.set("K", "a/b", "c", 5);
    expect(map.get("K", "a", "b/c")).toBeUndefined();
  });

  it("forgets a value, and the maps of a namespace and a kind with their last object", () => {
    const map = new ObjectMap<string>();
    map.set("GpuVm", "a", "x", "1");
    map.set("GpuVm", "a", "y", "2");
    expect(map.delete("GpuVm", "a", "x")).toBe(true);
    expect(map.delete("GpuVm", "a", "x")).toBe(false);
    expect(map.delete("GpuVm", "b", "x")).toBe(false);
    expect([...map.entries()]).toEqual([["GpuVm", "a", "y", "2"]]);
    map.delete("GpuVm", "a", "y");
    expect(map.size).toBe(0);
    expect([...map.entries()]).toEqual([]);
  });
});
