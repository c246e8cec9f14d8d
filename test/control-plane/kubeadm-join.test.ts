// The `kubeadm join` checker without a cluster: reading joins out of cloud-configs (Cluster API's own output, a
// flags-only join, encoded files) and refusing what kubeadm refuses; then token discovery against a fake API
// server that answers malformed or hostile things, which must end in a refusal, never a crash. The real
// discovery against kube-apiserver's bootstrap signer is test/kubernetes/cluster-api.test.ts.
import { createHmac } from "node:crypto";
import { readFile } from "node:fs/promises";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { gzipSync } from "node:zlib";
import { afterEach, describe, expect, it } from "vitest";
import {
  caCertHash,
  checkKubeadmJoin,
  KubeadmJoinError,
  parseKubeadmJoin,
  verifyKubeadmJoin,
} from "../../src/control-plane/kubeadm-join.ts";

const FIXTURES = path.resolve(import.meta.dirname, "../fixtures/kubeadm-join");
const fixture = (name: string): Promise<string> => readFile(path.join(FIXTURES, name), "utf8");

/** Cluster API v1.14.2's bootstrap data for a worker (test/kubernetes/cluster-api.test.ts's cluster). */
const capiWorker = (): Promise<string> => fixture("capi-worker.cloud-config");

function refusal(run: () => unknown): { reason: string; message: string } {
  try {
    run();
  } catch (error) {
    if (error instanceof KubeadmJoinError) return { reason: error.reason, message: error.message };
    throw error;
  }
  throw new Error("expected a KubeadmJoinError");
}

const HASH = `sha256:${"ab".repeat(32)}`;
const TOKEN = "abcdef.0123456789abcdef";

function cloudConfig(body: string): string {
  return `#cloud-config\n${body}`;
}

describe("parseKubeadmJoin", () => {
  it("reads Cluster API's worker bootstrap data as kubeadm would", async () => {
    expect(parseKubeadmJoin(await capiWorker())).toEqual({
      apiServerEndpoint: "127.0.0.1:39739",
      discoveryToken: { id: "sgri14", secret: "82gtf5fyyrbltr1j" },
      tlsBootstrapToken: { id: "sgri14", secret: "82gtf5fyyrbltr1j" },
      caCertHashes: ["sha256:ccc2745f2143b464a2ce173ea06a7a8e49f022b81471d87b5a82813724b9840c"],
      unsafeSkipCAVerification: false,
      nodeName: "{{ ds.meta_data.local_hostname }}",
      source: "kubeadm.k8s.io/v1beta4",
    });
  });

  it("reads a join given as flags, and a config file encoded in base64 or gzip+base64", () => {
    const flags = cloudConfig(
      `runcmd:\n  - [sh, -c, "true"]\n  - sudo /usr/bin/kubeadm join 10.0.0.1:6443 --token ${TOKEN} --discovery-token-ca-cert-hash ${HASH} --node-name=gpu-1\n`,
    );
    expect(parseKubeadmJoin(flags)).toMatchObject({
      apiServerEndpoint: "10.0.0.1:6443",
      discoveryToken: { id: "abcdef", secret: "0123456789abcdef" },
      caCertHashes: [HASH],
      nodeName: "gpu-1",
      source: "flags",
    });
    const join = [
      "apiVersion: kubeadm.k8s.io/v1beta3",
      "kind: JoinConfiguration",
      "discovery:",
      "  bootstrapToken: {apiServerEndpoint: '10.0.0.2:6443', token: abcdef.0123456789abcdef, unsafeSkipCAVerification: true}",
      "  tlsBootstrapToken: zyxwvu.9876543210zyxwvu",
    ].join("\n");
    for (const [encoding, content] of [
      ["b64", Buffer.from(join).toString("base64")],
      ["gz+b64", gzipSync(join).toString("base64")],
    ]) {
      const config = cloudConfig(
        `write_files:\n  - path: /etc/join.yaml\n    encoding: ${encoding}\n    content: ${content}\nruncmd:\n  - kubeadm join --config=/etc/join.yaml\n`,
      );
      expect(parseKubeadmJoin(config)).toMatchObject({
        apiServerEndpoint: "10.0.0.2:6443",
        tlsBootstrapToken: { id: "zyxwvu", secret: "9876543210zyxwvu" },
        caCertHashes: [],
        unsafeSkipCAVerification: true,
        source: "kubeadm.k8s.io/v1beta3",
      });
    }
  });

  it("refuses what is not a cloud-config with a kubeadm join, naming why", async () => {
    const capi = await capiWorker();
    const cases: [string, string, string][] = [
      ["#!/bin/bash\nkubeadm join 10.0.0.1:6443\n", "NotCloudConfig", "#cloud-config"],
      ["#cloud-config\nruncmd: [\n", "NotCloudConfig", "YAML map"],
      ["#cloud-config\n- a list\n", "NotCloudConfig", "YAML map"],
      ["#cloud-config\nruncmd: 42\n", "NotCloudConfig", "YAML map"],
      [cloudConfig("runcmd:\n  - kubeadm reset\n  - echo kubeadm join\n"), "NoKubeadmJoin", "runcmd"],
      [
        capi.replace("path: /run/kubeadm/kubeadm-join-config.yaml", "path: /elsewhere"),
        "InvalidJoinConfiguration",
        "no such file",
      ],
      [
        capi.replace("kind: JoinConfiguration", "kind: InitConfiguration"),
        "InvalidJoinConfiguration",
        "no JoinConfiguration",
      ],
      [capi.replace("kubeadm.k8s.io/v1beta4", "kubeadm.k8s.io/v1beta9"), "InvalidJoinConfiguration", "v1beta9"],
      [
        capi.replace("token: sgri14.82gtf5fyyrbltr1j", "token: not-a-token"),
        "InvalidJoinConfiguration",
        "not a bootstrap token",
      ],
      [
        capi.replace("apiServerEndpoint: 127.0.0.1:39739", "apiServerEndpoint: https://x/"),
        "InvalidJoinConfiguration",
        "host:port",
      ],
      [capi.replace(/sha256:[0-9a-f]+/, "md5:00"), "InvalidJoinConfiguration", "sha256:<64 hex>"],
      [
        capi.replace(/\n\s+caCertHashes:\n\s+- sha256:[0-9a-f]+/, ""),
        "InvalidJoinConfiguration",
        "unsafeSkipCAVerification",
      ],
      [
        cloudConfig(`runcmd:\n  - kubeadm join 10.0.0.1:6443 --discovery-token-ca-cert-hash ${HASH}\n`),
        "InvalidJoinConfiguration",
        "--token",
      ],
    ];
    for (const [text, reason, words] of cases) {
      const found = refusal(() => parseKubeadmJoin(text));
      expect({ reason: found.reason, has: found.message.includes(words) }, found.message).toEqual({
        reason,
        has: true,
      });
    }
  });

  it("refuses undecodable files and YAML bombs as refusals, never as crashes", () => {
    const garbage = cloudConfig(
      "write_files:\n  - path: /j.yaml\n    encoding: gz+b64\n    content: bm90IGd6aXA=\nruncmd:\n  - kubeadm join --config /j.yaml\n",
    );
    expect(refusal(() => parseKubeadmJoin(garbage))).toMatchObject({ reason: "InvalidJoinConfiguration" });
    const aliases = Array.from(
      { length: 12 },
      (_, index) => `a${index + 1}: &a${index + 1} [*a${index}, *a${index}, *a${index}]`,
    );
    const bomb = cloudConfig(`a0: &a0 [x, x]\n${aliases.join("\n")}\nruncmd: []\n`);
    expect(refusal(() => parseKubeadmJoin(bomb))).toMatchObject({ reason: "NotCloudConfig" });
  });

  it("refuses file discovery, which is not emulated", () => {
    const join =
      "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n  file: {kubeConfigPath: /etc/k.conf}\n";
    const config = cloudConfig(
      `write_files:\n  - path: /j.yaml\n    content: ${JSON.stringify(join)}\nruncmd:\n  - kubeadm join --config /j.yaml\n`,
    );
    expect(refusal(() => parseKubeadmJoin(config))).toMatchObject({ reason: "InvalidJoinConfiguration" });
  });
});

describe("caCertHash", () => {
  it("is sha256 of the certificate's SubjectPublicKeyInfo, as openssl computes it", async () => {
    // openssl x509 -pubkey -noout -in server.crt | openssl pkey -pubin -outform der | sha256sum
    expect(caCertHash(await fixture("server.crt"))).toBe(
      "sha256:d8c80a79eff21506989776d80a9ede77b79f513d10429985d77a309c517c01c1",
    );
  });
});

describe("verifyKubeadmJoin against an API server that answers badly", () => {
  let server: Server | undefined;

  afterEach(async () => {
    await new Promise((resolve) => server?.close(resolve) ?? resolve(undefined));
    server = undefined;
  });

  /** A TLS server for 127.0.0.1 (the fixture's self-signed certificate) answering each path with `answer`. */
  async function fakeApiServer(answer: (path: string) => { status: number; body: string }): Promise<string> {
    const [cert, key] = [await fixture("server.crt"), await fixture("server.key")];
    const listening = createServer({ cert, key }, (request, response) => {
      const { status, body } = answer(request.url ?? "");
      response.writeHead(status, { "content-type": "application/json" }).end(body);
    });
    server = listening;
    await new Promise<void>((resolve) => listening.listen(0, "127.0.0.1", resolve));
    return `127.0.0.1:${(listening.address() as AddressInfo).port}`;
  }

  function joinFor(endpoint: string, caHashes: string[]): string {
    return cloudConfig(
      `runcmd:\n  - kubeadm join ${endpoint} --token ${TOKEN} ${caHashes.map((hash) => `--discovery-token-ca-cert-hash ${hash}`).join(" ")}\n`,
    );
  }

  /** A cluster-info kubeconfig with the fixture's CA (or `caPem`), and its detached JWS for TOKEN as the bootstrap signer writes it. */
  async function signedClusterInfo(endpoint: string, caPem?: string): Promise<Record<string, string>> {
    const ca = Buffer.from(caPem ?? (await fixture("server.crt"))).toString("base64");
    const kubeconfig = `apiVersion: v1\nkind: Config\nclusters:\n- name: ""\n  cluster:\n    server: https://${endpoint}\n    certificate-authority-data: ${ca}\n`;
    const header = Buffer.from(JSON.stringify({ alg: "HS256", kid: "abcdef" })).toString("base64url");
    const signingInput = `${header}.${Buffer.from(kubeconfig).toString("base64url")}`;
    const signature = createHmac("sha256", "0123456789abcdef").update(signingInput).digest("base64url");
    return { kubeconfig, "jws-kubeconfig-abcdef": `${header}..${signature}` };
  }

  it("refuses an endpoint that is not a known cluster's before dialing it", async () => {
    const check = await checkKubeadmJoin(joinFor("127.0.0.1:1", [HASH]), { knownEndpoints: ["127.0.0.1:2"] });
    expect(check).toMatchObject({ ok: false, reason: "UnknownEndpoint" });
  });

  it("says Unreachable when nothing answers", async () => {
    const check = await checkKubeadmJoin(joinFor("127.0.0.1:1", [HASH]), { knownEndpoints: ["127.0.0.1:1"] });
    expect(check).toMatchObject({ ok: false, reason: "Unreachable" });
  });

  it("refuses malformed cluster-info answers without throwing", async () => {
    const answers: [string, string][] = [
      ["not json", "NotSetUpForTokenBootstrap"],
      ['{"data": 42}', "NotSetUpForTokenBootstrap"],
      ['{"data": {}}', "NotSetUpForTokenBootstrap"],
      ['{"data": {"kubeconfig": "x"}}', "TokenInvalidOrExpired"],
      ['{"data": {"kubeconfig": "x", "jws-kubeconfig-abcdef": "garbage"}}', "SignatureMismatch"],
      ['{"data": {"kubeconfig": "x", "jws-kubeconfig-abcdef": "bm90IGpzb24..c2ln"}}', "SignatureMismatch"],
    ];
    for (const [body, reason] of answers) {
      const endpoint = await fakeApiServer(() => ({ status: 200, body }));
      const check = await checkKubeadmJoin(joinFor(endpoint, [HASH]), { knownEndpoints: [endpoint] });
      expect(check, body).toMatchObject({ ok: false, reason });
      await new Promise((resolve) => server?.close(resolve));
    }
    const endpoint = await fakeApiServer(() => ({ status: 404, body: "{}" }));
    expect(await checkKubeadmJoin(joinFor(endpoint, [HASH]), { knownEndpoints: [endpoint] })).toMatchObject({
      ok: false,
      reason: "NotSetUpForTokenBootstrap",
    });
  });

  it("refuses a signed cluster-info whose CA is not a certificate", async () => {
    const broken = "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n";
    let info: Record<string, string> = {};
    const endpoint = await fakeApiServer(() => ({ status: 200, body: JSON.stringify({ data: info }) }));
    info = await signedClusterInfo(endpoint, broken);
    expect(await checkKubeadmJoin(joinFor(endpoint, [HASH]), { knownEndpoints: [endpoint] })).toMatchObject({
      ok: false,
      reason: "NotSetUpForTokenBootstrap",
    });
  });

  it("accepts a signed cluster-info with the pinned CA only when the token authenticates as a bootstrapper", async () => {
    let review = { status: 201, body: "" };
    const endpoint = await fakeApiServer((requestPath) =>
      requestPath.startsWith("/api/v1/namespaces/kube-public/configmaps/cluster-info")
        ? { status: 200, body: JSON.stringify({ data: info }) }
        : review,
    );
    const info = await signedClusterInfo(endpoint);
    const pinned = caCertHash(await fixture("server.crt"));
    const known = { knownEndpoints: [endpoint] };

    expect(await checkKubeadmJoin(joinFor(endpoint, [HASH]), known)).toMatchObject({ reason: "CAHashMismatch" });

    const bootstrapper = { username: "system:bootstrap:abcdef", groups: ["system:bootstrappers"] };
    review = { status: 201, body: JSON.stringify({ status: { userInfo: bootstrapper } }) };
    const accepted = await verifyKubeadmJoin(parseKubeadmJoin(joinFor(endpoint, [HASH, pinned])), known);
    expect(accepted).toMatchObject({ serverUrl: `https://${endpoint}`, ...bootstrapper });

    const refusals: { status: number; body: string }[] = [
      { status: 401, body: '{"kind":"Status","code":401}' },
      { status: 201, body: "not json" },
      {
        status: 201,
        body: JSON.stringify({ status: { userInfo: { username: "admin", groups: ["system:masters"] } } }),
      },
    ];
    for (const answer of refusals) {
      review = answer;
      expect(await checkKubeadmJoin(joinFor(endpoint, [pinned]), known), answer.body).toMatchObject({
        ok: false,
        reason: "TokenRejected",
      });
    }
  });
});
