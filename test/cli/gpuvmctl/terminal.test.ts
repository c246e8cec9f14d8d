// The real program (src/cli/gpuvmctl/main.ts on this Node) in a child process: prompts on a pseudo-terminal
// (util-linux `script` allocates it), plain output and exit codes through pipes.
import { spawn } from "node:child_process";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createCloudClient } from "../../../src/cloud/client.ts";
import { type Cli, startCli, visible } from "./harness.ts";

const MAIN = fileURLToPath(new URL("../../../src/cli/gpuvmctl/main.ts", import.meta.url));
let cli: Cli;

beforeAll(async () => {
  cli = await startCli({ latencyMs: 400 });
});
afterAll(async () => {
  await cli.close();
});

const shellQuote = (word: string) => `'${word.replaceAll("'", `'\\''`)}'`;

interface Session {
  /** Everything the terminal showed so far. */
  output(): string;
  /** Resolves once the output contains `text`. */
  waitFor(text: string): Promise<void>;
  type(text: string): void;
  exit: Promise<number>;
}

/** gpuvmctl on a pseudo-terminal: `script -q -e -c <command> /dev/null`, typing through script's stdin. */
function onTerminal(args: string[], env: Record<string, string | undefined> = {}): Session {
  const command = [process.execPath, MAIN, ...args].map(shellQuote).join(" ");
  const child = spawn("script", ["-q", "-e", "-c", command, "/dev/null"], {
    env: { ...process.env, ...cli.env, TERM: "xterm", ...env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let text = "";
  const waiters: { text: string; resolve: () => void }[] = [];
  const onData = (chunk: Buffer) => {
    text += chunk.toString("utf8");
    for (const waiter of [...waiters]) {
      if (text.includes(waiter.text)) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve();
      }
    }
  };
  child.stdout.on("data", onData);
  child.stderr.on("data", onData);
  const exit = new Promise<number>((resolve) => child.once("exit", (code) => resolve(code ?? -1)));
  void exit.then(() => child.stdin.end());
  return {
    output: () => text,
    waitFor: (wanted) =>
      new Promise<void>((resolve, reject) => {
        if (text.includes(wanted)) return resolve();
        waiters.push({ text: wanted, resolve });
        void exit.then(() => reject(new Error(`exited before showing ${JSON.stringify(wanted)}; output: ${text}`)));
      }),
    type: (typed) => child.stdin.write(typed),
    exit,
  };
}

/** gpuvmctl with pipes: no terminal anywhere. */
function piped(args: string[], env: Record<string, string | undefined> = {}, stdin = "") {
  const child = spawn(process.execPath, [MAIN, ...args], {
    env: { ...process.env, ...cli.env, ...env },
    stdio: "pipe",
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (c: Buffer) => {
    stdout += c.toString("utf8");
  });
  child.stderr.on("data", (c: Buffer) => {
    stderr += c.toString("utf8");
  });
  child.stdin.end(stdin);
  return new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
    child.once("close", (code) => resolve({ code: code ?? -1, stdout, stderr })),
  );
}

describe("on a pseudo-terminal", () => {
  it("login asks for the email (echoed) and the password (not echoed)", async () => {
    const { email, password } = cli.sim.user;
    const session = onTerminal(["login"]);
    await session.waitFor("Email: ");
    session.type(`${email}\r`);
    await session.waitFor("Password: ");
    session.type(`${password}\r`);
    expect(await session.exit).toBe(0);
    const shown = session.output();
    expect(shown).toContain(`Email: ${email}`);
    expect(shown).toContain(`Signed in to ${cli.sim.url} as ${email}`);
    expect(shown).not.toContain(password);
    const stored = JSON.parse(await readFile(path.join(cli.env.GPUVMCTL_CONFIG_DIR ?? "", "session.json"), "utf8"));
    expect(stored).toMatchObject({ email, apiUrl: cli.sim.url });
  });

  it("a wrong password is exit 3; Ctrl-C at the prompt is exit 130", async () => {
    const wrong = onTerminal(["login", "--email", cli.sim.user.email]);
    await wrong.waitFor("Password: ");
    wrong.type("not-the-password\r");
    expect(await wrong.exit).toBe(3);
    expect(wrong.output()).toContain("\u001b[31merror:\u001b[0m sign-in refused"); // red on a terminal
    expect(wrong.output()).not.toContain("not-the-password");
    const interrupted = onTerminal(["login", "--email", cli.sim.user.email]);
    await interrupted.waitFor("Password: ");
    interrupted.type("abc\u0003");
    expect(await interrupted.exit).toBe(130);
  });

  it("change-password asks three times without echo, and checks the repetition", async () => {
    const { password } = cli.sim.user;
    const differ = onTerminal(["change-password"]);
    await differ.waitFor("Current password: ");
    differ.type(`${password}\r`);
    await differ.waitFor("New password: ");
    differ.type("brand-new-password\r");
    await differ.waitFor("Repeat the new password: ");
    differ.type("brand-new-passw0rd\r");
    expect(await differ.exit).toBe(2);
    expect(differ.output()).toContain("the new passwords differ; nothing was changed");
    expect(differ.output()).not.toContain("brand-new");
  });

  it("--wait draws a spinner with the state and the elapsed time", async () => {
    const cloud = createCloudClient({
      baseUrl: cli.sim.url,
      credentials: { apiKey: cli.sim.apiKey },
      rateLimiter: false,
    });
    await cloud.vms.create(cli.sim.projectId, {
      name: "spin",
      type: "a40.1x",
      location: "us-east1-a",
      ssh_public_key: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAITestKey t@x",
    });
    await vi.waitFor(async () => {
      const [vm] = (await cloud.vms.list(cli.sim.projectId, { names: ["spin"] })).items;
      expect(vm?.state).toBe("STATE_RUNNING");
    });
    const session = onTerminal(["vms", "stop", "spin", "--wait"], { GPUCLOUD_API_KEY: cli.sim.apiKey });
    expect(await session.exit).toBe(0);
    const shown = session.output();
    expect(visible(shown)).toMatch(/\r⎋\[2K⎋\[36m⠋⎋\[0m STOP vm spin {2}IN_PROGRESS {2}0\.\ds/);
    expect(visible(shown)).toMatch(/⠙⎋\[0m STOP vm spin {2}IN_PROGRESS {2}\d\.\ds/); // redrawn in place
    expect(visible(shown)).toMatch(/\r⎋\[2K⎋\[32m✓⎋\[0m STOP vm spin {2}SUCCEEDED {2}\d+\.\ds\r?\n/);
  });
});

describe("through pipes", () => {
  it("plain output, the exit codes of the real process", async () => {
    const env = { GPUCLOUD_API_KEY: cli.sim.apiKey };
    const [orgs, missing, refused, badFlag, unreachable] = await Promise.all([
      piped(["orgs"], env),
      piped(["vms", "get", "ghost"], env),
      piped(["orgs"], { GPUCLOUD_API_KEY: "wrong-key-123" }),
      piped(["orgs", "--bogus"], env),
      piped(["orgs"], { ...env, GPUCLOUD_API_URL: "http://127.0.0.1:9/v0.1" }),
    ]);
    expect(orgs).toMatchObject({ code: 0, stderr: "" });
    expect(orgs.stdout).toMatch(/^ID +NAME +PAYMENT-CUSTOMER\n/);
    expect(orgs.stdout).not.toContain("\u001b[");
    expect([missing.code, refused.code, badFlag.code, unreachable.code]).toEqual([4, 3, 2, 5]);
    const noPrompt = await piped(["login", "--email", "a@b.c"]);
    expect(noPrompt.code).toBe(2);
    expect(noPrompt.stderr).toContain("standard input is not a terminal");
    expect(noPrompt.stderr).toContain("--password-stdin");
  });
});
