import { describe, expect, it } from "vitest";
import { compareSizes, formatSize, GIB, InvalidSizeError, parseSize, sizesEqual, TIB } from "../../src/cloud/sizes.ts";

describe("sizes", () => {
  it.each([
    ["1GiB", GIB],
    ["512GiB", 512 * GIB],
    ["1TiB", TIB],
    ["1000TiB", 1000 * TIB],
    [" 2TiB ", 2 * TIB],
  ])("parses %s", (text, bytes) => {
    expect(parseSize(text)).toBe(bytes);
  });

  it.each(["", "0GiB", "1.5TiB", "1TB", "1gib", "-1GiB", "01GiB", "GiB", "1 GiB"])("rejects %j", (text) => {
    expect(() => parseSize(text)).toThrow(InvalidSizeError);
  });

  it("formats in the largest exact unit", () => {
    expect(formatSize(TIB)).toBe("1TiB");
    expect(formatSize(1536 * GIB)).toBe("1536GiB");
    expect(formatSize(3 * TIB)).toBe("3TiB");
    expect(formatSize(parseSize("2048GiB"))).toBe("2TiB");
    expect(() => formatSize(GIB + 1)).toThrow(InvalidSizeError);
    expect(() => formatSize(0)).toThrow(InvalidSizeError);
  });

  it("compares across units as bytes", () => {
    expect(sizesEqual("1024GiB", "1TiB")).toBe(true);
    expect(sizesEqual("1023GiB", "1TiB")).toBe(false);
    expect(compareSizes("2TiB", "1025GiB")).toBe(1);
    expect(compareSizes("512GiB", "1TiB")).toBe(-1);
    expect(compareSizes("1TiB", TIB)).toBe(0);
    expect(["2TiB", "1GiB", "1025GiB"].sort(compareSizes)).toEqual(["1GiB", "1025GiB", "2TiB"]);
  });
});
