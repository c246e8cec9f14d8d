// Paging over 1,000 VMs: keyset tokens in both directions, every sort, stable under inserts and removals.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { Vm, VmListPage } from "../../src/cloud/wire.ts";
import type { Api } from "./helpers.ts";
import { errorOf, ok, startTestSimulator } from "./helpers.ts";

const COUNT = 1000;
let api: Api;

beforeAll(async () => {
  api = await startTestSimulator();
  const vms = Array.from({ length: COUNT }, (_, i) => ({ name: `vm-${String(i).padStart(4, "0")}` }));
  // Shuffle so that name order and insertion order differ.
  vms.sort(
    (a, b) =>
      ((a.name.charCodeAt(5) * 7 + a.name.charCodeAt(7)) % 13) -
      ((b.name.charCodeAt(5) * 7 + b.name.charCodeAt(7)) % 13),
  );
  const created = await api.admin("POST", api.project("/vms"), { vms });
  expect(ok(created, z.object({ items: z.array(z.object({ id: z.string() })) })).items.length).toBe(COUNT);
});
afterAll(async () => {
  await api.sim.close();
});

async function page(query: string) {
  return ok(await api.call("GET", api.project(`/vms?${query}`)), VmListPage);
}

async function walk(sort: string, limit: number): Promise<string[]> {
  const names: string[] = [];
  let query = `sort=${sort}&limit=${limit}`;
  for (let pages = 0; pages < COUNT; pages++) {
    const current = await page(query);
    names.push(...current.items.map((v) => v.name));
    if (current.next_page_token === "") break;
    query = `sort=${sort}&limit=${limit}&next_token=${current.next_page_token}`;
  }
  return names;
}

describe("VM list paging", () => {
  it("uses limit 50 by default, at most 500, with both tokens present", async () => {
    const first = await page("");
    expect(first.items.length).toBe(50);
    expect(first.prev_page_token).toBe("");
    expect(first.next_page_token).not.toBe("");
    expect((await page("limit=500")).items.length).toBe(500);
    errorOf(await api.call("GET", api.project("/vms?limit=0")), 400, "bad_request");
    errorOf(await api.call("GET", api.project("/vms?next_token=garbage!")), 400, "bad_request");
  });

  it("walks all 1,000 VMs in every sort order without gaps or repeats", async () => {
    const byName = await walk("name", 137);
    const expected = Array.from({ length: COUNT }, (_, i) => `vm-${String(i).padStart(4, "0")}`);
    expect(byName).toEqual(expected);
    expect(await walk("-name", 500)).toEqual([...expected].reverse());
    const byCreated = await walk("created_at", 250);
    expect(new Set(byCreated).size).toBe(COUNT);
    expect(await walk("-created_at", 250)).toEqual([...byCreated].reverse());
    expect(new Set(await walk("-updated_at", 300)).size).toBe(COUNT);
  });

  it("pages back with prev_page_token", async () => {
    const first = await page("sort=name&limit=100");
    const second = await page(`sort=name&limit=100&next_token=${first.next_page_token}`);
    expect(second.items[0]?.name).toBe("vm-0100");
    const back = await page(`sort=name&limit=100&prev_token=${second.prev_page_token}`);
    expect(back.items.map((v) => v.name)).toEqual(first.items.map((v) => v.name));
    expect(back.prev_page_token).toBe("");
    errorOf(
      await api.call("GET", api.project(`/vms?sort=-name&next_token=${first.next_page_token}`)),
      400,
      "bad_request",
    );
  });

  it("stays correct while VMs are added and removed between pages", async () => {
    const first = await page("sort=name&limit=10");
    const lastSeen = first.items[9]?.name;
    // Remove the item right after the page and one already seen; add one before and one after the cursor.
    const next = ok(await api.call("GET", api.project("/vms?names=vm-0010,vm-0003")), VmListPage).items;
    for (const vm of next) expect((await api.admin("DELETE", `/resources/vms/${vm.id}`)).status).toBe(200);
    await api.admin("POST", api.project("/vms"), { vms: [{ name: "vm-0000a" }, { name: "vm-0010a" }] });
    const second = await page(`sort=name&limit=3&next_token=${first.next_page_token}`);
    expect(lastSeen).toBe("vm-0009");
    expect(second.items.map((v) => Vm.parse(v).name)).toEqual(["vm-0010a", "vm-0011", "vm-0012"]);
  });
});
