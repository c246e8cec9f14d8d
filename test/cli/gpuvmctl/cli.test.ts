// The command line itself: --help on every command, usage errors (exit 2), colour only on a terminal and
// never with NO_COLOR, the line editor of the prompts, and the bash and zsh completion scripts run in real shells.
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { PassThrough } from "node:stream";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Command } from "../../../src/cli/gpuvmctl/command.ts";
import { ROOT } from "../../../src/cli/gpuvmctl/commands/index.ts";
import { applyKeys, type Io, promptSecret } from "../../../src/cli/gpuvmctl/io.ts";
import { type Cli, startCli, visible } from "./harness.ts";

const REPO = fileURLToPath(new URL("../../..", import.meta.url));
let cli: Cli;
beforeAll(async () => {
  cli = await startCli();
});
afterAll(async () => {
  await cli.close();
});

function paths(command: Command, prefix: string[] = []): string[][] {
  return (command.subcommands ?? []).flatMap((c) => [[...prefix, c.name], ...paths(c, [...prefix, c.name])]);
}

describe("help and usage errors", () => {
  it("docs/cli.md names every command", async () => {
    const doc = await readFile(path.join(REPO, "docs/cli.md"), "utf8");
    const missing = paths(ROOT).filter((words) => {
      const [group, sub] = words;
      // `vms get` may be written `vms list|get|delete`: the group, then the subcommand within its line.
      const lines = doc.split("\n").filter((line) => line.includes(`gpuvmctl ${group}`) || line.includes(`\`${group}`));
      return sub === undefined ? lines.length === 0 : !lines.some((line) => new RegExp(`\\b${sub}\\b`).test(line));
    });
    expect(missing).toEqual([]);
  });

  it("every command answers --help with its usage and flags (exit 0)", async () => {
    const all = paths(ROOT);
    expect(all.length).toBeGreaterThan(40);
    for (const words of [[], ...all]) {
      const result = await cli.run([...words, "--help"]);
      expect(result.code, words.join(" ")).toBe(0);
      expect(result.stdout, words.join(" ")).toMatch(
        new RegExp(`^Usage: gpuvmctl${words.map((w) => ` ${w}`).join("")}`),
      );
      expect(result.stdout).toContain("Global flags:\n  -o, --output <format>");
    }
    const stop = (await cli.run(["vms", "stop", "-h"])).stdout;
    expect(stop).toContain("Usage: gpuvmctl vms stop <VM> [flags]\n\nstop a running VM");
    expect(stop).toContain("-w, --wait");
  });

  it("no command, a group without its command, an unknown command or flag: exit 2 with a hint", async () => {
    const bare = await cli.run([]);
    expect(bare).toMatchObject({ code: 2, stdout: "" });
    expect(bare.stderr).toMatch(/^Usage: gpuvmctl <command> \[flags\]/);
    expect((await cli.run(["vms"])).stderr).toMatch(/^Usage: gpuvmctl vms <command> \[flags\]/);
    expect(await cli.run(["vm", "list"])).toMatchObject({
      code: 2,
      stderr: "error: gpuvmctl: unknown command 'vm' (did you mean 'vms'?)\nRun 'gpuvmctl --help' for usage.\n",
    });
    expect(await cli.run(["vms", "list", "--colour"])).toMatchObject({
      code: 2,
      stderr: "error: gpuvmctl vms list: unknown flag --colour\nRun 'gpuvmctl vms list --help' for usage.\n",
    });
    expect((await cli.run(["vms", "list", "--type"])).stderr).toContain("gpuvmctl vms list: --type needs a value");
    expect(await cli.run(["orgs", "-o", "xml"])).toMatchObject({
      code: 2,
      stderr: expect.stringContaining("--output must be one of table, json, yaml, not 'xml'"),
    });
    expect((await cli.run(["vms", "get"])).stderr).toContain("error: gpuvmctl vms get: expected <VM>");
    expect((await cli.run(["orgs", "extra"])).stderr).toContain("unexpected argument 'extra'");
    expect((await cli.run(["completion", "fish"])).code).toBe(2);
  });
});

describe("output", () => {
  const env = () => ({ GPUCLOUD_API_KEY: cli.sim.apiKey });

  it("colours on a terminal only, never with NO_COLOR or --no-color", async () => {
    const tty = await cli.run(["projects"], { env: env(), stdoutTty: true });
    expect(tty.stdout).toContain("\u001b[1mID");
    expect(tty.stdout).toContain("\u001b[32m*\u001b[0m");
    const pipe = await cli.run(["projects"], { env: env() });
    expect(pipe.stdout).not.toContain("\u001b[");
    const noColor = await cli.run(["projects"], { env: { ...env(), NO_COLOR: "1" }, stdoutTty: true });
    expect(noColor.stdout).not.toContain("\u001b[");
    const flag = await cli.run(["projects", "--no-color"], { env: env(), stdoutTty: true });
    expect(flag.stdout).toBe(pipe.stdout);
    const emptyNoColor = await cli.run(["projects"], { env: { ...env(), NO_COLOR: "" }, stdoutTty: true });
    expect(emptyNoColor.stdout).toContain("\u001b["); // no-color.org: only a non-empty value disables
    const error = await cli.run(["vm"], { stderrTty: true });
    expect(visible(error.stderr)).toMatch(/^⎋\[31merror:⎋\[0m /);
  });

  it("-o json and -o yaml carry the API's objects; --no-headers drops the header line", async () => {
    expect(JSON.parse((await cli.run(["orgs", "-o", "json"], { env: env() })).stdout)).toEqual([
      { id: cli.sim.organizationId, name: "Simulated Org", payment_customer_id: "cus_sim_0001" },
    ]);
    expect((await cli.run(["orgs", "-oyaml"], { env: env() })).stdout).toBe(
      `- id: ${cli.sim.organizationId}\n  name: Simulated Org\n  payment_customer_id: cus_sim_0001\n`,
    );
    expect((await cli.run(["orgs", "--no-headers"], { env: env() })).stdout).toBe(
      `${cli.sim.organizationId}   Simulated Org   cus_sim_0001\n`,
    );
  });

  it("an unreachable API is exit 5 naming what to check", async () => {
    const result = await cli.run(["orgs"], { env: { ...env(), GPUCLOUD_API_URL: "http://127.0.0.1:9/v0.1" } });
    expect(result.code).toBe(5);
    expect(result.stderr).toMatch(/^error: .*: check the API URL with 'gpuvmctl config' and your network\n$/);
  });
});

describe("prompts", () => {
  it("turn echo off before the question shows, read without echo, and restore the terminal", async () => {
    const events: string[] = [];
    const stdin = Object.assign(new PassThrough(), {
      isTTY: true,
      setRawMode(mode: boolean) {
        events.push(`raw:${mode}`);
      },
    });
    const stderr = new PassThrough();
    stderr.on("data", (chunk: Buffer) => events.push(`show:${JSON.stringify(chunk.toString())}`));
    const io = {
      stdin,
      stderr,
      stdout: new PassThrough(),
      env: {},
      now: Date.now,
      run: async () => 0,
    } as unknown as Io;
    const answer = promptSecret(io, "Password: ", "use --password-stdin");
    stdin.write("s3cret\r");
    expect(await answer).toBe("s3cret");
    expect(events).toEqual(["raw:true", 'show:"Password: "', "raw:false", 'show:"\\n"']);
  });
});

describe("the prompt's line editor", () => {
  it("Enter ends the line, Backspace edits, escape sequences are skipped, Ctrl-C and Ctrl-D stop", () => {
    const line = { typed: "" };
    const shown: string[] = [];
    expect(applyKeys(line, "pass\u007fs\u001b[Aw", (s) => shown.push(s))).toEqual({ kind: "more" });
    expect(line.typed).toBe("passw");
    expect(shown.join("")).toBe("pass\b \bsw");
    expect(applyKeys(line, "0rd\r\nnext\r")).toEqual({ kind: "enter", rest: "next\r" });
    expect(line.typed).toBe("passw0rd");
    expect(applyKeys({ typed: "x" }, "\u0003")).toEqual({ kind: "interrupt" });
    expect(applyKeys({ typed: "" }, "\u0004")).toEqual({ kind: "eof" });
    expect(applyKeys({ typed: "x" }, "\u0004")).toEqual({ kind: "more" });
  });
});

const ZSH_FETCHED = path.join(REPO, ".ci/cache/zsh-static-5.9/bin/zsh-static");

// `npm ci && npm test` on a fresh machine must pass: without a zsh, fetch Debian's static one (the same script
// CI runs; a no-op once cached) instead of failing.
function zshBinary(): string {
  if (existsSync(ZSH_FETCHED)) return ZSH_FETCHED;
  try {
    return execFileSync("sh", ["-c", "command -v zsh"], { encoding: "utf8" }).trim();
  } catch {
    try {
      execFileSync("bash", [path.join(REPO, ".ci/fetch-zsh.sh")], { stdio: "pipe", timeout: 120_000 });
    } catch (error) {
      throw new Error("no zsh for the completion test and .ci/fetch-zsh.sh could not fetch one: install zsh", {
        cause: error,
      });
    }
    return ZSH_FETCHED;
  }
}

/** Runs `code` in `shell` after sourcing the completion script, with the command line as "$@"; the words offered. */
function completer(shell: string, flag: string, code: string, script: string) {
  return (...words: string[]): string[] =>
    execFileSync(shell, [flag, `source "$1"; shift; ${code}`, "shell", script, "gpuvmctl", ...words], {
      encoding: "utf8",
    })
      .split("\n")
      .filter(Boolean);
}

describe("shell completion", () => {
  it("bash: commands, subcommands, flags and flag values", async () => {
    const script = path.join(cli.configDir, "gpuvmctl.bash");
    await writeFile(script, (await cli.run(["completion", "bash"])).stdout);
    const complete = completer(
      "bash",
      "-c",
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a bash array expansion, not a template
      'COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _gpuvmctl; printf \'%s\\n\' "${COMPREPLY[@]}"',
      script,
    );
    expect(complete("vm")).toEqual(["vms"]);
    expect(complete("vms", "s")).toEqual(["start", "stop"]);
    expect(complete("-o", "json", "vms", "stop", "--w")).toEqual(["--wait"]);
    expect(complete("usage", "--group-by", "")).toEqual(["day", "type", "location"]);
    expect(complete("manifest", "vm", "x", "--type", "a100-80")).toEqual([
      "a100-80gb.1x",
      "a100-80gb.2x",
      "a100-80gb.4x",
      "a100-80gb.8x",
    ]);
    expect(complete("orgs", "-o", "y")).toEqual(["yaml"]);
    expect(complete("completion", "")).toContain("zsh");
    expect(
      execFileSync("bash", ["-c", `source "$1"; complete -p gpuvmctl`, "bash", script], { encoding: "utf8" }),
    ).toBe("complete -o default -F _gpuvmctl gpuvmctl\n");
  });

  it("zsh: the script parses, and offers the same words (compadd recorded)", async () => {
    const zsh = zshBinary();
    const script = path.join(cli.configDir, "_gpuvmctl");
    await writeFile(script, (await cli.run(["completion", "zsh"])).stdout);
    execFileSync(zsh, ["-n", script]);
    // compadd is recorded, not run: the words after `--` are what zsh would offer.
    const record = 'compadd() { while [[ $1 != -- ]]; do shift; done; shift; print -l -- "$@"; }';
    const complete = completer(zsh, "-fc", `words=("$@"); CURRENT=$#; ${record}; _gpuvmctl`, script);
    expect(complete("vms", "")).toEqual(["list", "get", "start", "stop", "reset", "delete"]);
    expect(complete("vms", "stop", "--")).toContain("--wait");
    expect(complete("usage", "--format", "")).toEqual(["table", "csv"]);
    expect(complete("-o", "")).toEqual(["table", "json", "yaml"]);
    expect(complete("")).toContain("suggest");
  });
});
