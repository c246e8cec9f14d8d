// The operator's allow-list of cloud API URLs: what a credentials Secret may name. Every spelling trick that
// would let a Secret reach another host or path than the allowed one must be refused.
import { describe, expect, it } from "vitest";
import { ApiUrlPolicy, normalizeApiUrl } from "../../src/util/api-url.ts";

describe("normalizeApiUrl", () => {
  it.each([
    ["HTTPS://API.Example.COM:443/v0.1/", "https://api.example.com/v0.1"],
    ["http://127.0.0.1:80/v0.1", "http://127.0.0.1/v0.1"],
    ["http://0x7f.0.0.1:8070/v0.1", "http://127.0.0.1:8070/v0.1"],
    ["http://[0:0:0:0:0:0:0:1]:8070/v0.1", "http://[::1]:8070/v0.1"],
    ["https://api.example.com/v0.1/../v0.1/./", "https://api.example.com/v0.1"],
    ["https://api.example.com", "https://api.example.com"],
  ])("%s → %s", (text, href) => {
    const parsed = normalizeApiUrl(text);
    expect(parsed.ok && parsed.url.href).toBe(href);
  });

  it.each([
    ["ftp://api.example.com/v0.1", "http(s)"],
    ["not a url", "not a URL"],
    ["http://user:secret@api.example.com/v0.1", "user name"],
    ["http://127.0.0.1:9/latest/meta-data/secret?x=", "query"],
    ["http://127.0.0.1:9/v0.1?", "query"],
    ["http://127.0.0.1:9/v0.1#x", "fragment"],
    ["http://127.0.0.1:9/v0.1/%2e%2e%2fadmin", "encode"],
    ["http://127.0.0.1:9/v0.1/..%2Fadmin", "encode"],
    ["http://127.0.0.1:9/v0.1//admin", "empty path segments"],
  ])("refuses %s", (text, problem) => {
    const parsed = normalizeApiUrl(text);
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) {
      expect(parsed.problem).toContain(problem);
      expect(parsed.problem).not.toContain("secret");
    }
  });
});

describe("ApiUrlPolicy", () => {
  const policy = new ApiUrlPolicy(["https://api.example.com/v0.1", "http://[::1]:8070/"]);

  it.each([
    "https://api.example.com/v0.1",
    "https://api.example.com/v0.1/",
    "https://API.example.com:443/v0.1",
    "https://api.example.com/v0.1/eu",
    "https://api.example.com/x/../v0.1",
    "http://[0::1]:8070/v0.1",
  ])("allows %s", (url) => {
    expect(policy.check(url).allowed).toBe(true);
  });

  it.each([
    "https://api.example.com/v0.10",
    "https://api.example.com/v0.1/../admin",
    "https://api.example.com/",
    "http://api.example.com/v0.1",
    "https://api.example.com:8443/v0.1",
    "https://api.example.com.evil.test/v0.1",
    "https://api.example.com./v0.1",
    "https://evil.test/https://api.example.com/v0.1",
    "https://api.example.com@evil.test/v0.1",
    "http://127.0.0.1:8070/v0.1",
    "http://[::ffff:127.0.0.1]:8070/v0.1",
    "https://api.example.com/v0.1?x=/v0.1",
  ])("refuses %s", (url) => {
    const verdict = policy.check(url);
    expect(verdict.allowed).toBe(false);
    if (!verdict.allowed) expect(verdict.message).toMatch(/^apiUrl /);
  });

  it("allows nothing when the operator names no URL, and says how to allow one", () => {
    const verdict = new ApiUrlPolicy([]).check("https://api.example.com/v0.1");
    expect(verdict).toEqual({
      allowed: false,
      message:
        "apiUrl https://api.example.com/v0.1 is not allowed by the operator; allowed: none (set --api-url or --allowed-api-urls)",
    });
  });

  it("refuses an unusable allowed entry with its reason", () => {
    expect(() => new ApiUrlPolicy(["https://api.example.com/v0.1?x"])).toThrow(/query/);
  });
});
