// kubeRequest authenticates once per AUTHENTICATION_TTL_MS, not once per request, and afresh after a 401.
import type { IncomingMessage } from "node:http";
import type { KubeConfig } from "@kubernetes/client-node";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { kubeRequest } from "../../src/runtime/kube-http.ts";
import { kubeConfigFor, startHttpServer } from "./helpers.ts";

describe("kubeRequest's authentication", () => {
  let server: Awaited<ReturnType<typeof startHttpServer>>;
  let url: string;
  let accepted = "Bearer first";
  const seen: string[] = [];

  beforeEach(async () => {
    seen.length = 0;
    accepted = "Bearer first";
    server = await startHttpServer((request: IncomingMessage, response) => {
      const authorization = request.headers.authorization ?? "";
      seen.push(authorization);
      response.writeHead(authorization === accepted ? 200 : 401, { "content-type": "application/json" });
      response.end(JSON.stringify({ kind: authorization === accepted ? "Ok" : "Status" }));
    });
    url = server.url;
  });

  afterEach(() => server.close());

  /** A KubeConfig whose token is read from `token()` and whose authentications are counted. */
  function countingConfig(token: () => string): { kubeConfig: KubeConfig; authentications: () => number } {
    const kubeConfig = kubeConfigFor(url);
    let authentications = 0;
    const original = kubeConfig.applySecurityAuthentication.bind(kubeConfig);
    kubeConfig.applySecurityAuthentication = async (context) => {
      authentications++;
      await original(context);
      context.setHeaderParam("Authorization", token());
    };
    return { kubeConfig, authentications: () => authentications };
  }

  it("reuses one authentication for many requests, concurrent ones included", async () => {
    const { kubeConfig, authentications } = countingConfig(() => "Bearer first");
    await Promise.all(Array.from({ length: 10 }, () => kubeRequest(kubeConfig, "GET", "/api")));
    for (let i = 0; i < 10; i++) await kubeRequest(kubeConfig, "GET", "/api");
    expect(seen).toHaveLength(20);
    expect(authentications()).toBe(1);
  });

  it("authenticates afresh after a 401, so a rotated token is picked up by the next request", async () => {
    let token = "Bearer first";
    const { kubeConfig, authentications } = countingConfig(() => token);
    await kubeRequest(kubeConfig, "GET", "/api");
    token = "Bearer second";
    accepted = "Bearer second";
    await expect(kubeRequest(kubeConfig, "GET", "/api")).rejects.toMatchObject({ code: 401 });
    await expect(kubeRequest(kubeConfig, "GET", "/api")).resolves.toEqual({ kind: "Ok" });
    expect(seen).toEqual(["Bearer first", "Bearer first", "Bearer second"]);
    expect(authentications()).toBe(2);
  });
});
