import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { shellQuote } from "../../src/util/shell-quote.ts";

describe("shellQuote", () => {
  it("leaves plain words alone and quotes the rest", () => {
    expect(shellQuote("--kubeconfig=/tmp/a_b/c.yaml")).toBe("--kubeconfig=/tmp/a_b/c.yaml");
    expect(shellQuote("a b")).toBe("'a b'");
    expect(shellQuote("")).toBe("''");
  });

  it("gives the shell back the very words", () => {
    const words = ["it's", "$HOME", "a\nb", "`id`", "x'y'z", "*"];
    const echoed = spawnSync("sh", ["-c", `printf '%s\\0' ${words.map(shellQuote).join(" ")}`], { encoding: "utf8" });
    expect(echoed.stdout.split("\0").slice(0, -1)).toEqual(words);
  });
});
