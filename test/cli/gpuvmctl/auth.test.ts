// Sign-in: login (password from stdin), the 0600 token file, transparent refresh with rotation persisted
// atomically (also across concurrent commands), logout, whoami, change-password, config and its sources.
import { readdir, readFile, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCloudClient } from "../../../src/cloud/client.ts";
import { createManualClock, type ManualClock } from "../../../src/simulator/index.ts";
import { type Cli, login, startCli } from "./harness.ts";

let cli: Cli;
let clock: ManualClock;

beforeAll(async () => {
  clock = createManualClock();
  cli = await startCli({ clock, tokenTtlSeconds: 600 });
});
afterAll(async () => {
  await cli.close();
});

const sessionFile = () => path.join(cli.env.GPUVMCTL_CONFIG_DIR ?? "", "session.json");
const readSession = async () => JSON.parse(await readFile(sessionFile(), "utf8")) as Record<string, unknown>;

describe("login", () => {
  it("signs in, keeps only the tokens (0600 in a 0700 directory) and adopts the only project", async () => {
    const result = await login(cli);
    expect(result).toMatchObject({ code: 0, stderr: "" });
    expect(result.stdout).toBe(
      `Signed in to ${cli.sim.url} as admin@example.com (token valid until 2026-11-21T12:10:00Z).\nDefault project: ${cli.sim.projectId} (default)\n`,
    );
    const dir = cli.env.GPUVMCTL_CONFIG_DIR ?? "";
    expect((await stat(dir)).mode & 0o777).toBe(0o700);
    expect((await readdir(dir)).sort()).toEqual(["config.json", "session.json"]);
    for (const file of ["config.json", "session.json"])
      expect((await stat(path.join(dir, file))).mode & 0o777).toBe(0o600);
    const session = await readSession();
    expect(Object.keys(session).sort()).toEqual(
      ["accessToken", "apiUrl", "email", "expiresAtMs", "refreshToken", "signedInAt"].sort(),
    );
    expect(JSON.stringify(session)).not.toContain(cli.sim.user.password);
    expect(JSON.parse(await readFile(path.join(dir, "config.json"), "utf8"))).toEqual({
      apiUrl: cli.sim.url,
      projectId: cli.sim.projectId,
    });
  });

  it("refuses a wrong password with exit 3 and keeps the earlier sign-in", async () => {
    const before = await readSession();
    const result = await cli.run(["login", "--email", "admin@example.com", "--password-stdin"], { stdin: "nope\n" });
    expect(result.code).toBe(3);
    expect(result.stderr).toMatch(/^error: sign-in refused for admin@example.com at .*: invalid email or password\n$/);
    expect(await readSession()).toEqual(before);
  });

  it("needs an API URL (exit 2), an email off a terminal (exit 2) and a password on stdin", async () => {
    const noUrl = await cli.run(["login", "--email", "a@b.c", "--password-stdin"], {
      stdin: "x\n",
      env: { GPUCLOUD_API_URL: undefined, GPUVMCTL_CONFIG_DIR: path.join(cli.configDir, "empty") },
    });
    expect(noUrl).toMatchObject({
      code: 2,
      stderr: expect.stringContaining("no API URL: pass --api-url or set GPUCLOUD_API_URL"),
    });
    const noEmail = await cli.run(["login", "--password-stdin"], { stdin: "x\n" });
    expect(noEmail.code).toBe(2);
    expect(noEmail.stderr).toContain("standard input is not a terminal, so there is no one to ask: pass --email");
    const emptyStdin = await cli.run(["login", "--email", "a@b.c", "--password-stdin"], { stdin: "" });
    expect(emptyStdin).toMatchObject({
      code: 2,
      stderr: expect.stringContaining("--password-stdin: standard input is empty"),
    });
    const badUrl = await cli.run(["whoami", "--api-url", "ftp://x"]);
    expect(badUrl).toMatchObject({ code: 2, stderr: expect.stringContaining("--api-url: expected an http(s) URL") });
  });
});

describe("the stored sign-in", () => {
  it("is renewed transparently; the single-use refresh token is rotated and the new pair persisted", async () => {
    await login(cli);
    const first = await readSession();
    clock.advance(11 * 60_000); // the access token (600 s) has expired
    const projects = await cli.run(["projects", "--no-headers"]);
    expect(projects.code).toBe(0);
    const second = await readSession();
    expect(second.refreshToken).not.toBe(first.refreshToken);
    expect(second.accessToken).not.toBe(first.accessToken);
    expect(second.expiresAtMs).toBe(clock.now() + 600_000);
    // The spent refresh token is refused by the server now.
    const client = createCloudClient({
      baseUrl: cli.sim.url,
      credentials: { apiKey: "unused-key" },
      rateLimiter: false,
    });
    await expect(client.auth.refresh(String(first.refreshToken))).rejects.toMatchObject({ status: 401 });
    expect(await readdir(cli.env.GPUVMCTL_CONFIG_DIR ?? "")).not.toContain("session.lock");
  });

  it("is renewed once when several commands find it expired at the same time", async () => {
    await login(cli);
    clock.advance(11 * 60_000);
    const results = await Promise.all([
      cli.run(["orgs"]),
      cli.run(["projects"]),
      cli.run(["whoami"]),
      cli.run(["locations"]),
    ]);
    expect(results.map((r) => r.code)).toEqual([0, 0, 0, 0]);
    // Another run with the stored pair still works: nobody stored a refresh token that was already spent.
    clock.advance(11 * 60_000);
    expect((await cli.run(["orgs"])).code).toBe(0);
  });

  it("asks to sign in again (exit 3) when the server no longer knows it", async () => {
    await login(cli);
    await fetch(`${cli.sim.adminUrl}/reset`, { method: "POST" }); // tokens forgotten, as after a restart
    const result = await cli.run(["orgs"]);
    expect(result.code).toBe(3);
    expect(result.stderr).toBe("error: the sign-in of admin@example.com has expired: run 'gpuvmctl login'\n");
  });

  it("is for the API URL it was made at", async () => {
    await login(cli);
    const result = await cli.run(["orgs", "--api-url", "http://127.0.0.1:1/v0.1"]);
    expect(result.code).toBe(3);
    expect(result.stderr).toContain(`signed in to ${cli.sim.url}, not http://127.0.0.1:1/v0.1 (--api-url)`);
  });

  it("is unusable when the file is damaged: exit 3 naming the file", async () => {
    await writeFile(sessionFile(), '{"apiUrl": 1}');
    const result = await cli.run(["orgs"]);
    expect(result).toMatchObject({
      code: 3,
      stderr: `error: the sign-in in ${sessionFile()} is unreadable: run 'gpuvmctl login'\n`,
    });
  });
});

describe("logout, whoami, change-password, config", () => {
  it("whoami shows the user, projects and token expiry (and JSON with -o json)", async () => {
    await login(cli);
    const text = await cli.run(["whoami"]);
    expect(text.code).toBe(0);
    expect(text.stdout).toContain("User:               admin@example.com\n");
    expect(text.stdout).toContain(`Projects:           default (${cli.sim.projectId})\n`);
    const json = JSON.parse((await cli.run(["whoami", "-o", "json"])).stdout) as Record<string, unknown>;
    expect(json).toMatchObject({
      kind: "user",
      email: "admin@example.com",
      apiUrl: cli.sim.url,
      defaultProject: cli.sim.projectId,
    });
  });

  it("config names the source of each setting and never prints a secret", async () => {
    await login(cli);
    const session = await readSession();
    const withKey = await cli.run(["config"], {
      env: { GPUCLOUD_API_KEY: cli.sim.apiKey, GPUCLOUD_PROJECT_ID: "p-env" },
    });
    expect(withKey.stdout).toBe(
      [
        `Config directory:  ${cli.env.GPUVMCTL_CONFIG_DIR}`,
        `API URL:           ${cli.sim.url} (from GPUCLOUD_API_URL)`,
        "Credential:        API key from GPUCLOUD_API_KEY (the sign-in of admin@example.com is not used)",
        "Project:           p-env (from GPUCLOUD_PROJECT_ID)",
        "",
      ].join("\n"),
    );
    const fromFiles = await cli.run(["config", "-o", "json"], { env: { GPUCLOUD_API_URL: undefined } });
    expect(JSON.parse(fromFiles.stdout)).toMatchObject({
      apiUrl: { value: cli.sim.url, source: path.join(cli.env.GPUVMCTL_CONFIG_DIR ?? "", "config.json") },
      credential: { kind: "session", email: "admin@example.com" },
      project: { value: cli.sim.projectId },
    });
    const flags = await cli.run(["config", "--api-key", "k-flag-secret", "-p", "p-flag", "--api-url", "http://h/v0.1"]);
    expect(flags.stdout).toContain("http://h/v0.1 (from --api-url)");
    expect(flags.stdout).toContain("API key from --api-key");
    expect(flags.stdout).toContain("p-flag (from --project)");
    for (const output of [withKey.stdout, fromFiles.stdout, flags.stdout]) {
      for (const secret of [
        cli.sim.apiKey,
        "k-flag-secret",
        String(session.accessToken),
        String(session.refreshToken),
      ]) {
        expect(output).not.toContain(secret);
      }
    }
  });

  it("--debug logs the requests on stderr without a password, token or key", async () => {
    const signIn = await cli.run(["login", "--email", "admin@example.com", "--password-stdin", "--debug"], {
      stdin: `${cli.sim.user.password}\n`,
    });
    expect(signIn.stderr).toContain('"route":"/auth/token"');
    const session = await readSession();
    clock.advance(11 * 60_000); // a renewal too
    const orgs = await cli.run(["orgs", "--debug"]);
    const keyed = await cli.run(["orgs", "--debug"], { env: { GPUCLOUD_API_KEY: cli.sim.apiKey } });
    expect(orgs.stderr).toContain('"route":"/organizations"');
    const renewed = await readSession();
    for (const secret of [
      cli.sim.user.password,
      cli.sim.apiKey,
      String(session.accessToken),
      String(session.refreshToken),
      String(renewed.accessToken),
      String(renewed.refreshToken),
    ]) {
      expect(signIn.stderr + orgs.stderr + keyed.stderr).not.toContain(secret);
    }
  });

  it("works with an API key alone (GPUCLOUD_API_KEY), without any file", async () => {
    const result = await cli.run(["whoami", "-o", "json"], {
      env: { GPUCLOUD_API_KEY: cli.sim.apiKey, GPUVMCTL_CONFIG_DIR: path.join(cli.configDir, "nothing") },
    });
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout)).toMatchObject({
      kind: "api-key",
      credentialSource: "GPUCLOUD_API_KEY",
      defaultProject: cli.sim.projectId,
    });
  });

  it("change-password changes it (two lines on stdin); a wrong current password is exit 3", async () => {
    await login(cli);
    const { password } = cli.sim.user;
    const wrong = await cli.run(["change-password", "--password-stdin"], { stdin: "not-it\nnew-password-1\n" });
    expect(wrong.code).toBe(3);
    const short = await cli.run(["change-password", "--password-stdin"], { stdin: `${password}\nshort\n` });
    expect(short).toMatchObject({ code: 2, stderr: expect.stringContaining("at least 8 characters") });
    const changed = await cli.run(["change-password", "--password-stdin"], { stdin: `${password}\nnew-password-1\n` });
    expect(changed).toMatchObject({ code: 0, stdout: "Password changed for admin@example.com.\n" });
    const relogin = await cli.run(["login", "--email", "admin@example.com", "--password-stdin"], {
      stdin: "new-password-1\n",
    });
    expect(relogin.code).toBe(0);
    await cli.run(["change-password", "--password-stdin"], { stdin: `new-password-1\n${password}\n` });
    const apiKey = await cli.run(["change-password", "--password-stdin"], {
      stdin: "a\nb\n",
      env: { GPUCLOUD_API_KEY: cli.sim.apiKey },
    });
    expect(apiKey).toMatchObject({ code: 3, stderr: expect.stringContaining("needs a sign-in, not an API key") });
  });

  it("logout forgets the tokens; then commands ask to sign in (exit 3)", async () => {
    await login(cli);
    expect((await cli.run(["logout"])).stdout).toBe(`Signed out (removed ${sessionFile()}).\n`);
    expect((await cli.run(["logout"])).stdout).toBe("Not signed in.\n");
    const result = await cli.run(["orgs"]);
    expect(result).toMatchObject({
      code: 3,
      stderr: "error: not signed in: run 'gpuvmctl login', or set GPUCLOUD_API_KEY (and GPUCLOUD_API_URL)\n",
    });
  });
});
