import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/runtime/config.ts";
import { createLogger, formatLogLine, lazyChildLogger } from "../../src/runtime/logging.ts";

function capture(): { lines: string[]; write(text: string): void } {
  const lines: string[] = [];
  return {
    lines,
    write(text: string) {
      lines.push(...text.split("\n").filter((line) => line !== ""));
    },
  };
}

describe("createLogger", () => {
  it("writes JSON lines with epoch milliseconds by default, secrets redacted", () => {
    const out = capture();
    createLogger({ level: "info" }, out).info({ controller: "gpuvm", creds: { apiKey: "s3cret" } }, "hello");
    const record = JSON.parse(out.lines[0] ?? "") as Record<string, unknown>;
    expect(record).toMatchObject({ msg: "hello", controller: "gpuvm", creds: { apiKey: "[redacted]" } });
    expect(typeof record.time).toBe("number");
  });

  it("writes ISO 8601 timestamps with --log-time-format iso8601", () => {
    const out = capture();
    createLogger({ level: "info", timeFormat: "iso8601" }, out).info("hello");
    const record = JSON.parse(out.lines[0] ?? "") as Record<string, unknown>;
    expect(record.time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  });

  it("writes one text line per record with --log-format text, secrets still redacted", () => {
    const out = capture();
    const logger = createLogger({ level: "debug", format: "text", timeFormat: "iso8601" }, out);
    logger
      .child({ controller: "gpuvm", reconcileID: "r-1" })
      .warn({ err: new Error("cloud 503"), token: "t0k" }, "retry");
    logger.info({ credentials: { password: "pw" } }, "signed in");
    expect(out.lines).toHaveLength(2);
    expect(out.lines[0]).toMatch(
      /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z WARN {2}retry controller=gpuvm reconcileID=r-1 err=cloud 503 token=\[redacted\]$/,
    );
    expect(out.lines[1]).toContain('INFO  signed in credentials={"password":"[redacted]"}');
    expect(out.lines.join("\n")).not.toContain('pw"');
  });
});

describe("lazyChildLogger", () => {
  it("writes what the child would write, and makes no child for levels that are off", () => {
    const out = capture();
    const parent = createLogger({ level: "info" }, out);
    let children = 0;
    const child = parent.child.bind(parent);
    parent.child = ((bindings: Record<string, unknown>) => {
      children++;
      return child(bindings);
    }) as typeof parent.child;
    const lazy = lazyChildLogger(parent, { name: "vm-1", reconcileID: "r-1" });
    lazy.debug({ detail: 1 }, "not written");
    lazy.trace("nor this");
    expect(lazy.isLevelEnabled("debug")).toBe(false);
    expect(children).toBe(1); // isLevelEnabled is read off the child itself
    const other = lazyChildLogger(parent, { name: "vm-2" });
    other.debug("off");
    expect(children).toBe(1);
    other.warn({ token: "t0k" }, "written");
    other.error("again");
    expect(children).toBe(2);
    expect(out.lines.map((line) => JSON.parse(line) as Record<string, unknown>)).toMatchObject([
      { name: "vm-2", msg: "written", token: "[redacted]" },
      { name: "vm-2", msg: "again" },
    ]);
  });
});

describe("formatLogLine", () => {
  it("leaves lines that are not JSON objects as they are", () => {
    expect(formatLogLine("    at Object.<anonymous>")).toBe("    at Object.<anonymous>");
    expect(formatLogLine("[1,2]")).toBe("[1,2]");
  });
});

describe("log flags", () => {
  it("reads --log-format and --log-time-format, and refuses other values", () => {
    const parsed = parseConfig(["--log-format", "text", "--log-time-format=iso8601"], {});
    expect(parsed).toMatchObject({ kind: "config", config: { logFormat: "text", logTimeFormat: "iso8601" } });
    expect(parseConfig([], { GPUVM_LOG_FORMAT: "text" })).toMatchObject({ config: { logFormat: "text" } });
    expect(parseConfig([], {})).toMatchObject({ config: { logFormat: "json", logTimeFormat: "epoch" } });
    expect(parseConfig(["--log-format", "yaml"], {})).toEqual({
      kind: "error",
      message: '--log-format: "yaml" is not one of json, text',
    });
    expect(parseConfig(["--log-time-format", "rfc"], {})).toMatchObject({ kind: "error" });
  });
});
