// The RBAC verdict itself: refused requests are missing permissions, granted permissions no request used are
// unneeded, a Role's grants count only in its namespace.
import { describe, expect, it } from "vitest";
import { type AuditedRequest, grantedPermissions, type Permission, rbacVerdict } from "./rbac.ts";

function request(fields: Partial<AuditedRequest>): AuditedRequest {
  return {
    user: "system:serviceaccount:gpuvm-system:gpuvm-operator",
    uri: "/",
    verb: "get",
    group: "",
    resource: "secrets",
    namespace: "default",
    code: 200,
    decision: "allow",
    ...fields,
  };
}

const granted: Permission[] = [
  { group: "", resource: "secrets", verb: "get" },
  { group: "", resource: "secrets", verb: "delete" },
  { group: "coordination.k8s.io", resource: "leases", verb: "get", namespace: "gpuvm-system" },
];

describe("the RBAC verdict", () => {
  it("names refused requests as missing and unused grants as unneeded", () => {
    const verdict = rbacVerdict(granted, [
      request({}),
      request({ verb: "patch", resource: "events", group: "events.k8s.io", code: 403, decision: "forbid" }),
      request({ verb: "get", group: "coordination.k8s.io", resource: "leases", namespace: "other" }),
    ]);
    expect(verdict.missing).toEqual(["patch events.k8s.io/events (in default)"]);
    expect(verdict.unused).toEqual([
      "delete core/secrets (cluster-wide)",
      "get coordination.k8s.io/leases (in gpuvm-system)",
    ]);
  });

  it("reads deploy/rbac.yaml: every grant of its ClusterRole cluster-wide, of its Role in its namespace", async () => {
    const permissions = await grantedPermissions();
    expect(permissions.length).toBeGreaterThan(5);
    expect(permissions.filter((p) => p.resource === "leases").every((p) => p.namespace === "gpuvm-system")).toBe(true);
    expect(permissions.filter((p) => p.resource === "secrets").every((p) => p.namespace === undefined)).toBe(true);
  });
});
