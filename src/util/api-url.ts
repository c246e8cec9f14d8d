// Cloud API URLs and the operator's allow-list (--allowed-api-urls). A tenant writes `apiUrl` into its own
// credentials Secret; the operator only sends that tenant's key to URLs its own configuration allows, so that a
// Secret cannot point the operator (and its network position) at an internal address.
// Both sides are normalised by the WHATWG URL parser (lower-case scheme and host, canonical IPv4 and IPv6, default
// port dropped, `.`/`..` and `%2e` segments resolved) and then compared as origin + path-segment prefix.
// Whatever the parser would leave ambiguous for the server is refused outright: user info, a query or fragment,
// encoded `/`, `\` or `.` in the path, empty path segments. Dependency-free (used by runtime, cloud and controllers).

export interface NormalizedApiUrl {
  /** `https://api.example.com` (scheme, host, port when not the default). */
  origin: string;
  /** Path segments, no empty ones: `["v0.1"]` for `/v0.1/`. */
  segments: string[];
  /** The canonical spelling: origin + path without a trailing slash (`https://api.example.com/v0.1`). */
  href: string;
}

export type ApiUrlParse = { ok: true; url: NormalizedApiUrl } | { ok: false; problem: string };

/** Parse and normalise one API URL; a problem names what is wrong, never echoing user info. */
export function normalizeApiUrl(text: string): ApiUrlParse {
  const trimmed = text.trim();
  let url: URL;
  try {
    url = new URL(trimmed);
  } catch {
    return { ok: false, problem: "is not a URL" };
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return { ok: false, problem: "must be an http(s) URL" };
  if (url.username !== "" || url.password !== "")
    return { ok: false, problem: "must not carry a user name or password" };
  // `new URL("http://h/p?")` has an empty search: look at the text too.
  if (url.search !== "" || trimmed.includes("?")) return { ok: false, problem: "must not have a query (?…)" };
  if (url.hash !== "" || trimmed.includes("#")) return { ok: false, problem: "must not have a fragment (#…)" };
  if (url.hostname === "") return { ok: false, problem: "has no host" };
  const path = url.pathname.replace(/\/+$/, "");
  if (/%(2e|2f|5c)/i.test(path)) return { ok: false, problem: "must not encode '.', '/' or '\\' in its path" };
  const segments = path === "" ? [] : path.slice(1).split("/");
  if (segments.some((segment) => segment === "")) return { ok: false, problem: "must not have empty path segments" };
  const origin = `${url.protocol}//${url.host}`;
  return {
    ok: true,
    url: { origin, segments, href: segments.length === 0 ? origin : `${origin}/${segments.join("/")}` },
  };
}

/** True when `candidate` is `base` or below it: same origin, and base's path segments are a prefix. */
export function isWithin(base: NormalizedApiUrl, candidate: NormalizedApiUrl): boolean {
  if (candidate.origin !== base.origin || candidate.segments.length < base.segments.length) return false;
  return base.segments.every((segment, index) => candidate.segments[index] === segment);
}

export type ApiUrlVerdict = { allowed: true; url: NormalizedApiUrl } | { allowed: false; message: string };

/** The operator's allow-list: the URLs (and everything below their paths) a credentials Secret may name. */
export class ApiUrlPolicy {
  readonly #allowed: NormalizedApiUrl[];

  /** Throws RangeError naming the first entry that is not an acceptable API URL. */
  constructor(allowed: readonly string[]) {
    this.#allowed = allowed.map((entry) => {
      const parsed = normalizeApiUrl(entry);
      if (!parsed.ok) throw new RangeError(`allowed API URL ${JSON.stringify(entry)} ${parsed.problem}`);
      return parsed.url;
    });
  }

  /** The allowed URLs in canonical spelling (for messages and logs). */
  get allowed(): readonly string[] {
    return this.#allowed.map((url) => url.href);
  }

  check(apiUrl: string): ApiUrlVerdict {
    const parsed = normalizeApiUrl(apiUrl);
    // The value itself stays out of the message: it may be a tenant's probe of an internal address.
    if (!parsed.ok) return { allowed: false, message: `apiUrl ${parsed.problem}` };
    if (this.#allowed.some((base) => isWithin(base, parsed.url))) return { allowed: true, url: parsed.url };
    const list = this.#allowed.length === 0 ? "none (set --api-url or --allowed-api-urls)" : this.allowed.join(", ");
    return {
      allowed: false,
      message: `apiUrl ${parsed.url.href} is not allowed by the operator; allowed: ${list}`,
    };
  }
}
