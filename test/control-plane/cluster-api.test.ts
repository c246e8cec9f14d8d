// How Cluster API's rendered components become what runs on loopback, without a cluster: clusterctl's variables,
// the webhooks and conversion webhooks pointed at the manager's URL with our CA, what a pod would need dropped,
// and the Deployment's flags kept but for the ones a process on loopback replaces. The managers themselves run in
// test/kubernetes/cluster-api.test.ts.
import { describe, expect, it } from "vitest";
import { loopbackComponents, managerArgs, substituteVariables } from "../../src/control-plane/cluster-api.ts";
import type { ManifestObject } from "../../src/control-plane/operator-identity.ts";

describe("substituteVariables", () => {
  it("fills clusterctl's variables from the values given, else from their defaults", () => {
    // biome-ignore lint/suspicious/noTemplateCurlyInString: clusterctl's variables, not a template literal
    const text = "--gates=MachinePool=${EXP_MACHINE_POOL:=true},X=${EXP_X:-false} --ttl=${TTL=15m} ${NAME}";
    expect(substituteVariables(text, { EXP_X: "true", NAME: "a" })).toBe("--gates=MachinePool=true,X=true --ttl=15m a");
    expect(() => substituteVariables(text, {})).toThrow("variable NAME has no value");
    // biome-ignore lint/suspicious/noTemplateCurlyInString: clusterctl's variables, not a template literal
    expect(substituteVariables("${EMPTY:=}", {})).toBe("");
  });
});

const CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
const WEBHOOK_URL = "https://127.0.0.1:4443";

function components(): ManifestObject[] {
  const annotations = { "cert-manager.io/inject-ca-from": "capi-system/capi-serving-cert", kept: "yes" };
  const service = { name: "capi-webhook-service", namespace: "capi-system" };
  return [
    { apiVersion: "v1", kind: "Namespace", metadata: { name: "capi-system" } },
    { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "capi-manager", namespace: "capi-system" } },
    { apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRole", metadata: { name: "capi-manager-role" } },
    {
      apiVersion: "apiextensions.k8s.io/v1",
      kind: "CustomResourceDefinition",
      metadata: { name: "machines.cluster.x-k8s.io", annotations },
      spec: {
        group: "cluster.x-k8s.io",
        conversion: {
          strategy: "Webhook",
          webhook: { conversionReviewVersions: ["v1"], clientConfig: { service: { ...service, path: "/convert" } } },
        },
      },
    },
    {
      apiVersion: "apiextensions.k8s.io/v1",
      kind: "CustomResourceDefinition",
      metadata: { name: "plain.example.dev" },
      spec: { group: "example.dev" },
    },
    {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "ValidatingWebhookConfiguration",
      metadata: { name: "capi-validating-webhook-configuration", annotations },
      webhooks: [
        { name: "validation.machine.cluster.x-k8s.io", clientConfig: { service: { ...service, path: "/validate-m" } } },
      ],
    },
    { apiVersion: "v1", kind: "Service", metadata: { name: "capi-webhook-service", namespace: "capi-system" } },
    { apiVersion: "cert-manager.io/v1", kind: "Certificate", metadata: { name: "capi-serving-cert" } },
    {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "capi-controller-manager", namespace: "capi-system" },
      spec: {
        template: {
          spec: {
            serviceAccountName: "capi-manager",
            containers: [
              { name: "manager", args: ["--leader-elect", "--diagnostics-address=:8443", "--feature-gates=A=true"] },
            ],
          },
        },
      },
    },
  ];
}

describe("loopbackComponents", () => {
  it("points conversion and admission webhooks at the manager's loopback URL with our CA", () => {
    const { identity, crds, webhooks, deployment } = loopbackComponents(components(), WEBHOOK_URL, CA);
    const caBundle = Buffer.from(CA).toString("base64");
    expect(identity.map((object) => object.kind)).toEqual(["Namespace", "ServiceAccount", "ClusterRole"]);
    expect(crds[0]).toMatchObject({
      metadata: { annotations: { kept: "yes" } },
      spec: {
        conversion: {
          strategy: "Webhook",
          webhook: { conversionReviewVersions: ["v1"], clientConfig: { url: `${WEBHOOK_URL}/convert`, caBundle } },
        },
      },
    });
    expect(crds[0]?.metadata.annotations).not.toHaveProperty("cert-manager.io/inject-ca-from");
    expect(crds[1]?.spec).toEqual({ group: "example.dev" });
    expect(webhooks).toHaveLength(1);
    expect(webhooks[0]?.webhooks).toEqual([
      { name: "validation.machine.cluster.x-k8s.io", clientConfig: { url: `${WEBHOOK_URL}/validate-m`, caBundle } },
    ]);
    expect(deployment.metadata.name).toBe("capi-controller-manager");
  });

  it("refuses components without a Deployment (nothing to run)", () => {
    const withoutDeployment = components().filter((object) => object.kind !== "Deployment");
    expect(() => loopbackComponents(withoutDeployment, WEBHOOK_URL, CA)).toThrow("without a Deployment");
  });
});

describe("managerArgs", () => {
  it("keeps the Deployment's flags but leader election and the ones a process on loopback sets", () => {
    const deploymentArgs = ["--leader-elect", "--diagnostics-address=:8443", "--feature-gates=A=true", "--v=2"];
    expect(
      managerArgs(deploymentArgs, { "diagnostics-address": "127.0.0.1:9", "health-addr": "127.0.0.1:8" }, ["--x"]),
    ).toEqual([
      "--feature-gates=A=true",
      "--v=2",
      "--diagnostics-address=127.0.0.1:9",
      "--health-addr=127.0.0.1:8",
      "--x",
    ]);
  });
});
