import { describe, expect, it } from "vitest";
import { eventually } from "../../src/util/eventually.ts";

describe("eventually", () => {
  it("polls past undefined and errors until the check gives a value", async () => {
    let calls = 0;
    const value = await eventually(
      "the third call",
      async () => {
        calls++;
        if (calls === 1) throw new Error("not there yet");
        return calls === 3 ? "there" : undefined;
      },
      5_000,
      1,
    );
    expect(value).toBe("there");
    expect(calls).toBe(3);
  });

  it("says what it waited for, with the last error as the cause, when time runs out", async () => {
    const failure = eventually(
      "a server",
      async () => {
        throw new Error("ECONNREFUSED");
      },
      30,
      5,
    );
    await expect(failure).rejects.toThrow("timed out after 30 ms waiting for a server");
    await expect(failure).rejects.toMatchObject({ cause: { message: "ECONNREFUSED" } });
  });
});
