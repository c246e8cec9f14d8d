// The playground keeps its cluster and its cloud in the state directory: stopped and started again (on other
// ports), it finds the same objects, the same cloud resources, and credentials that point at the new simulator.
import { rm } from "node:fs/promises";
import { afterAll, describe, expect, it } from "vitest";
import { listCloud, listObjects, type Playground, startPlayground, waitAllReady } from "./harness.ts";

/** The restart journey on the test double (restart.test.ts) or on a real control plane (test/kubernetes). */
export function describeRestart(options: { kube: "double" | "real"; kubectl?: string }): void {
  describe(`playground restart (${options.kube === "real" ? "real control plane" : "Kubernetes API test double"})`, () => {
    let stateDir: string | undefined;
    let playground: Playground | undefined;

    afterAll(async () => {
      await playground?.close();
      if (stateDir !== undefined) await rm(stateDir, { recursive: true, force: true });
    });

    it("finds the same objects and cloud resources after a restart", async () => {
      const first = await startPlayground({ latencyMs: 100, ...options });
      playground = first;
      stateDir = first.stateDir;
      await first.kubectl("apply", "-f", "examples/01-gpu-network.yaml");
      await waitAllReady(first);
      const [network] = await listObjects(first, "gpunetworks");
      const networkId = network?.status?.id;
      expect(networkId).toBeTypeOf("string");
      expect((await first.close({ keepState: true })).code).toBe(0);

      const second = await startPlayground({ latencyMs: 100, stateDir, ...options });
      playground = second;
      expect(second.cloud.url).not.toBe(first.cloud.url); // new free port: the Secret must follow it
      const secret = JSON.parse(
        await second.kubectl("get", "secret", "gpucloud-credentials", "-n", "default", "-o", "json"),
      ) as { data: Record<string, string> };
      expect(Buffer.from(secret.data.apiUrl ?? "", "base64").toString()).toBe(second.cloud.url);
      const [networkAgain] = await listObjects(second, "gpunetworks");
      expect(networkAgain?.status?.id).toBe(networkId);
      expect((await listCloud(second, "vpc/networks")).map((item) => item.id)).toEqual([networkId]);
      await waitAllReady(second);
      expect((await listCloud(second, "vpc/networks")).map((item) => item.id)).toEqual([networkId]);
    });
  });
}
