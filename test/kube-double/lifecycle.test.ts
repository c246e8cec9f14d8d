// Lifecycle of the double: the state file, fault injection (in process and over HTTP), Table answers,
// discovery, and the `kube-double` CLI command.
import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { CoreV1Api } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWithFixture } from "./helpers.ts";

let directory: string;
beforeAll(async () => {
  directory = await mkdtemp(join(tmpdir(), "kube-double-life-"));
});
afterAll(() => rm(directory, { recursive: true, force: true }));

describe("state file", () => {
  it("keeps objects and resourceVersions across a restart", async () => {
    const stateFile = join(directory, "state.json");
    const first = await startWithFixture({ stateFile, persistDebounceMs: 10 });
    const core = first.kubeConfig.makeApiClient(CoreV1Api);
    const created = await core.createNamespacedConfigMap({
      namespace: "default",
      body: { metadata: { name: "kept" }, data: { a: "1" } },
    });
    await first.double.close();

    const second = await startWithFixture({ stateFile });
    try {
      const core2 = second.kubeConfig.makeApiClient(CoreV1Api);
      const read = await core2.readNamespacedConfigMap({ name: "kept", namespace: "default" });
      expect(read.data).toEqual({ a: "1" });
      expect(read.metadata?.uid).toBe(created.metadata?.uid);
      const next = await core2.createNamespacedConfigMap({
        namespace: "default",
        body: { metadata: { name: "after" } },
      });
      expect(Number(next.metadata?.resourceVersion)).toBeGreaterThan(Number(created.metadata?.resourceVersion));
      const saved = JSON.parse(await readFile(stateFile, "utf8")) as { objects: unknown[] };
      expect(saved.objects.length).toBeGreaterThan(0);
    } finally {
      await second.double.close();
    }
  });
});

describe("faults", () => {
  it("fails the next matching requests, with Retry-After on 429, in process and over HTTP", async () => {
    const { double } = await startWithFixture();
    try {
      const configmaps = `${double.url}/api/v1/namespaces/default/configmaps`;
      double.faults.failNext(1, 429, { path: "/configmaps" });
      expect((await fetch(`${double.url}/api/v1/namespaces/default/secrets`)).status).toBe(200);
      const limited = await fetch(configmaps);
      expect(limited.status).toBe(429);
      expect(limited.headers.get("retry-after")).toBe("1");
      expect(((await limited.json()) as { reason: string }).reason).toBe("TooManyRequests");
      expect((await fetch(configmaps)).status).toBe(200);

      const admin = await fetch(`${double.url}/_double/faults/fail-next`, {
        method: "POST",
        body: JSON.stringify({ count: 2, status: 500 }),
      });
      expect(admin.status).toBe(200);
      expect((await fetch(configmaps)).status).toBe(500);
      expect((await fetch(configmaps)).status).toBe(500);
      expect((await fetch(configmaps)).status).toBe(200);
      expect(double.faults.injected()).toEqual({ 429: 1, 500: 2 });
      expect(double.faults.watchesGone()).toBe(0);

      expect(
        (
          await fetch(`${double.url}/_double/faults/fail-next`, {
            method: "POST",
            body: JSON.stringify({ count: 1, status: 200 }),
          })
        ).status,
      ).toBe(400);

      await fetch(`${double.url}/_double/faults/latency`, { method: "POST", body: JSON.stringify({ ms: 150 }) });
      const started = Date.now();
      await fetch(configmaps);
      expect(Date.now() - started).toBeGreaterThanOrEqual(140);
      double.faults.setLatency(0);
    } finally {
      await double.close();
    }
  });
});

describe("write log", () => {
  it("records every write in order with its sender (User-Agent) and the answer's status; reads are left out", async () => {
    const { double } = await startWithFixture();
    try {
      const send = (method: string, path: string, body?: unknown) =>
        fetch(`${double.url}${path}`, {
          method,
          headers: { "user-agent": "gpuvm-operator (replica-a_1)", "content-type": "application/json" },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        });
      const before = Date.now();
      await send("POST", "/api/v1/namespaces/default/configmaps", { metadata: { name: "logged" } });
      await send("GET", "/api/v1/namespaces/default/configmaps/logged");
      await send("POST", "/api/v1/namespaces/default/configmaps", { metadata: { name: "logged" } });
      expect(
        double.writes().map(({ method, path, userAgent, status }) => ({ method, path, userAgent, status })),
      ).toEqual([
        {
          method: "POST",
          path: "/api/v1/namespaces/default/configmaps",
          userAgent: "gpuvm-operator (replica-a_1)",
          status: 201,
        },
        {
          method: "POST",
          path: "/api/v1/namespaces/default/configmaps",
          userAgent: "gpuvm-operator (replica-a_1)",
          status: 409,
        },
      ]);
      expect(double.writes()[0]?.at).toBeGreaterThanOrEqual(before);
    } finally {
      await double.close();
    }
  });
});

describe("HTTP surface", () => {
  it("answers discovery, OpenAPI v3 and Table requests", async () => {
    const { double } = await startWithFixture();
    try {
      const group = (await (await fetch(`${double.url}/apis/example.dev/v1`)).json()) as {
        resources: { name: string; shortNames?: string[]; categories?: string[] }[];
      };
      expect(group.resources).toContainEqual(
        expect.objectContaining({ name: "widgets", shortNames: ["wdg"], categories: ["examples"] }),
      );
      expect(group.resources.map((resource) => resource.name)).toContain("widgets/status");

      const root = (await (await fetch(`${double.url}/openapi/v3`)).json()) as {
        paths: Record<string, { serverRelativeURL: string }>;
      };
      const url = root.paths["apis/example.dev/v1"]?.serverRelativeURL ?? "";
      const document = (await (await fetch(`${double.url}${url}`)).json()) as {
        paths: Record<string, { patch?: Record<string, unknown> }>;
      };
      const patch = document.paths["/apis/example.dev/v1/namespaces/{namespace}/widgets/{name}"]?.patch;
      expect(patch?.["x-kubernetes-group-version-kind"]).toEqual({
        group: "example.dev",
        version: "v1",
        kind: "Widget",
      });
      expect(patch?.parameters).toContainEqual(expect.objectContaining({ name: "fieldValidation", in: "query" }));

      const table = (await (
        await fetch(`${double.url}/api/v1/namespaces`, {
          headers: { Accept: "application/json;as=Table;v=v1;g=meta.k8s.io" },
        })
      ).json()) as {
        kind: string;
        columnDefinitions: { name: string }[];
        rows: { cells: unknown[] }[];
      };
      expect(table.kind).toBe("Table");
      expect(table.columnDefinitions.map((column) => column.name)).toEqual(["Name", "Status", "Age"]);
      expect(table.rows.map((row) => row.cells[0])).toContain("default");

      await fetch(`${double.url}/api/v1/namespaces/default/configmaps`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ metadata: { name: "two-keys" }, data: { a: "1", b: "2" } }),
      });
      const tableAccept = { Accept: "application/json;as=Table;v=v1;g=meta.k8s.io" };
      const configMaps = (await (
        await fetch(`${double.url}/api/v1/namespaces/default/configmaps`, { headers: tableAccept })
      ).json()) as typeof table;
      expect(configMaps.columnDefinitions.map((column) => column.name)).toEqual(["Name", "Data", "Age"]);
      expect(configMaps.rows[0]?.cells.slice(0, 2)).toEqual(["two-keys", 2]);

      const unknownPath = await fetch(`${double.url}/apis/example.dev/v1/nothings`);
      expect(unknownPath.status).toBe(404);
      expect(((await unknownPath.json()) as { kind: string }).kind).toBe("Status");
      const badJson = await fetch(`${double.url}/api/v1/namespaces`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: "{",
      });
      expect(badJson.status).toBe(400);
      const notJson = await fetch(`${double.url}/api/v1/namespaces`, { method: "POST", body: "x" });
      expect(notJson.status).toBe(415);
    } finally {
      await double.close();
    }
  });
});

describe("kube-double command", () => {
  it("prints the URL, writes a kubeconfig and exits 0 after SIGTERM", async () => {
    const kubeconfig = join(directory, "cli-kubeconfig");
    const mainFile = fileURLToPath(new URL("../../src/cli/main.ts", import.meta.url));
    const child = spawn(process.execPath, [mainFile, "kube-double", "--port", "0", "--kubeconfig-out", kubeconfig], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    const url = await new Promise<string>((resolve, reject) => {
      child.stdout.on("data", (chunk: Buffer) => {
        const line = chunk.toString().trim();
        if (line.startsWith("http://")) resolve(line);
      });
      child.once("exit", (code) => reject(new Error(`exited early with ${code}`)));
    });
    expect((await fetch(`${url}/version`)).status).toBe(200);
    expect(await readFile(kubeconfig, "utf8")).toContain(`server: ${url}`);
    const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
    child.kill("SIGTERM");
    expect(await exited).toBe(0);
  });

  it("refuses bad flags with exit code 2", async () => {
    const { main } = await import("../../src/cli/commands/kube-double.ts");
    expect(await main(["--port", "70000"])).toBe(2);
    expect(await main(["--bogus"])).toBe(2);
  });
});
