// kubeTargetOf: a kubeconfig's current context as a target, credentials inline only, and what it refuses.
import { describe, expect, it } from "vitest";
import { KubeconfigError, kubeTargetOf } from "../../src/control-plane/http.ts";

const b64 = (text: string): string => Buffer.from(text).toString("base64");

function kubeconfig(user: string, current = "admin@lab"): string {
  return [
    "apiVersion: v1",
    "kind: Config",
    "clusters:",
    "  - name: lab",
    "    cluster:",
    "      server: https://127.0.0.1:6443",
    `      certificate-authority-data: ${b64("CA PEM")}`,
    "  - name: other",
    "    cluster:",
    "      server: https://10.0.0.1:6443",
    "users:",
    "  - name: admin",
    "    user:",
    user,
    "contexts:",
    "  - name: admin@lab",
    "    context: {cluster: lab, user: admin}",
    `current-context: ${current}`,
    "",
  ].join("\n");
}

describe("kubeTargetOf", () => {
  it("reads the current context's server, CA and client certificate or token", () => {
    const certificate = kubeconfig(
      `      client-certificate-data: ${b64("CERT")}\n      client-key-data: ${b64("KEY")}`,
    );
    expect(kubeTargetOf(certificate)).toEqual({
      url: "https://127.0.0.1:6443",
      ca: "CA PEM",
      cert: "CERT",
      key: "KEY",
    });
    expect(kubeTargetOf(kubeconfig("      token: abc.def"))).toEqual({
      url: "https://127.0.0.1:6443",
      ca: "CA PEM",
      token: "abc.def",
    });
  });

  it.each([
    ["not YAML", "a: [", /not YAML/],
    ["no clusters", "apiVersion: v1\nkind: Config\n", /has no clusters/],
    ["an unknown current context", kubeconfig("      token: t", "nobody"), /no context "nobody"/],
    [
      "credentials in files only",
      kubeconfig("      client-certificate: /etc/admin.crt"),
      /no token or client certificate data inline/,
    ],
    ["an exec plugin", kubeconfig("      exec: {command: aws}"), /no token or client certificate data inline/],
  ])("refuses %s", (_label, text, message) => {
    expect(() => kubeTargetOf(text)).toThrow(KubeconfigError);
    expect(() => kubeTargetOf(text)).toThrow(message);
  });
});
