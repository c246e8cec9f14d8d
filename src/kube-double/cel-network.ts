// The IP and CIDR libraries of Kubernetes CEL (k8s.io/apiserver/pkg/cel/library ip.go and cidr.go, in CRD rules
// since Kubernetes 1.31): `ip()`, `isIP()`, `cidr()`, `isCIDR()`, the members `family()`, `is*()`, `ip()`,
// `masked()`, `prefixLength()`, `containsIP()`, `containsCIDR()`, and `string()` of both. Parsing follows Go's
// net/netip: IPv4 octets without leading zeros, IPv6 with at most one `::`; zones and IPv4-mapped IPv6 addresses
// are refused like the library refuses them. Text forms are netip's (RFC 5952 for IPv6).

/** An address: 4 bytes (IPv4) or 16 (IPv6). */
export class CelIp {
  readonly bytes: readonly number[];
  constructor(bytes: readonly number[]) {
    this.bytes = bytes;
  }
  toString(): string {
    return formatAddress(this.bytes);
  }
}

/** A prefix: an address (host bits kept, as netip.Prefix keeps them) and a length in bits. */
export class CelCidr {
  readonly ip: CelIp;
  readonly bits: number;
  constructor(ip: CelIp, bits: number) {
    this.ip = ip;
    this.bits = bits;
  }
  toString(): string {
    return `${this.ip.toString()}/${this.bits}`;
  }
}

/** Why a text is not an address or prefix (the library's own wording, shortened). */
export class NetworkParseError extends Error {
  override name = "NetworkParseError";
}

function parseIpv4(text: string): number[] | undefined {
  const parts = text.split(".");
  if (parts.length !== 4) return undefined;
  const octets: number[] = [];
  for (const part of parts) {
    if (!/^(0|[1-9][0-9]{0,2})$/.test(part)) return undefined;
    const value = Number(part);
    if (value > 255) return undefined;
    octets.push(value);
  }
  return octets;
}

function parseIpv6(text: string): number[] | undefined {
  if (text.includes("%")) return undefined;
  const halves = text.split("::");
  if (halves.length > 2) return undefined;
  const groupsOf = (half: string): number[] | undefined => {
    if (half === "") return [];
    const words: number[] = [];
    const pieces = half.split(":");
    for (const [index, piece] of pieces.entries()) {
      if (index === pieces.length - 1 && piece.includes(".")) {
        const v4 = parseIpv4(piece);
        if (v4 === undefined) return undefined;
        words.push(((v4[0] ?? 0) << 8) | (v4[1] ?? 0), ((v4[2] ?? 0) << 8) | (v4[3] ?? 0));
      } else if (/^[0-9a-fA-F]{1,4}$/.test(piece)) {
        words.push(Number.parseInt(piece, 16));
      } else {
        return undefined;
      }
    }
    return words;
  };
  const head = groupsOf(halves[0] ?? "");
  const tail = halves.length === 2 ? groupsOf(halves[1] ?? "") : [];
  if (head === undefined || tail === undefined) return undefined;
  const missing = 8 - head.length - tail.length;
  if (halves.length === 2 ? missing < 1 : missing !== 0) return undefined;
  const words = [...head, ...new Array<number>(halves.length === 2 ? missing : 0).fill(0), ...tail];
  return words.flatMap((word) => [word >> 8, word & 0xff]);
}

function isIpv4Mapped(bytes: readonly number[]): boolean {
  return bytes.length === 16 && bytes.slice(0, 10).every((b) => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff;
}

function formatAddress(bytes: readonly number[]): string {
  if (bytes.length === 4) return bytes.join(".");
  const words = Array.from({ length: 8 }, (_, i) => ((bytes[2 * i] ?? 0) << 8) | (bytes[2 * i + 1] ?? 0));
  // netip: the first longest run of at least two zero words becomes "::".
  let zeroStart = -1;
  let zeroEnd = -1;
  for (let i = 0; i < 8; i++) {
    let j = i;
    while (j < 8 && words[j] === 0) j++;
    if (j - i >= 2 && j - i > zeroEnd - zeroStart) {
      zeroStart = i;
      zeroEnd = j;
    }
  }
  const hex = (from: number, to: number) =>
    words
      .slice(from, to)
      .map((w) => w.toString(16))
      .join(":");
  return zeroStart < 0 ? hex(0, 8) : `${hex(0, zeroStart)}::${hex(zeroEnd, 8)}`;
}

function parseAddress(text: string): number[] | undefined {
  return text.includes(":") ? parseIpv6(text) : parseIpv4(text);
}

/** `ip('10.0.0.1')`: refuses zones and IPv4-mapped IPv6 addresses, as the library does. */
export function parseIp(text: string): CelIp {
  if (text.includes("%")) throw new NetworkParseError(`IP address "${text}" with zone value is not allowed`);
  const bytes = parseAddress(text);
  if (bytes === undefined) {
    throw new NetworkParseError(`IP Address "${text}" parse error during conversion from string: ParseAddr("${text}")`);
  }
  if (isIpv4Mapped(bytes)) throw new NetworkParseError(`IPv4-mapped IPv6 address "${text}" is not allowed`);
  return new CelIp(bytes);
}

/** `cidr('10.0.0.0/16')`: an address and a length; host bits may be set (masked() clears them). */
export function parseCidr(text: string): CelCidr {
  const slash = text.indexOf("/");
  const address = slash < 0 ? undefined : parseAddress(text.slice(0, slash));
  const length = text.slice(slash + 1);
  const bits = /^(0|[1-9][0-9]{0,2})$/.test(length) ? Number(length) : Number.NaN;
  if (address === undefined || Number.isNaN(bits) || bits > address.length * 8 || text.includes("%")) {
    throw new NetworkParseError(
      `network address parse error during conversion from string: network address parse error during conversion from string: netip.ParsePrefix("${text}")`,
    );
  }
  if (isIpv4Mapped(address)) throw new NetworkParseError(`IPv4-mapped IPv6 address "${text}" is not allowed`);
  return new CelCidr(new CelIp(address), bits);
}

function succeeds(parse: () => unknown): boolean {
  try {
    parse();
    return true;
  } catch (error) {
    if (error instanceof NetworkParseError) return false;
    throw error;
  }
}

export const isIp = (text: string): boolean => succeeds(() => parseIp(text));
export const isCidr = (text: string): boolean => succeeds(() => parseCidr(text));

export function masked(cidr: CelCidr): CelCidr {
  const bytes = cidr.ip.bytes.map((byte, index) => {
    const keep = Math.min(8, Math.max(0, cidr.bits - index * 8));
    return byte & (0xff << (8 - keep)) & 0xff;
  });
  return new CelCidr(new CelIp(bytes), cidr.bits);
}

export function containsIp(cidr: CelCidr, ip: CelIp): boolean {
  if (ip.bytes.length !== cidr.ip.bytes.length) return false;
  const network = masked(cidr);
  return masked(new CelCidr(ip, cidr.bits)).toString() === network.toString();
}

export function containsCidr(cidr: CelCidr, other: CelCidr): boolean {
  return other.bits >= cidr.bits && containsIp(cidr, other.ip);
}

/** The `family()`/`is*()` members of an IP. */
export function ipMember(name: string, ip: CelIp): number | boolean | undefined {
  const b = ip.bytes;
  const v4 = b.length === 4;
  switch (name) {
    case "family":
      return v4 ? 4 : 6;
    case "isUnspecified":
      return b.every((byte) => byte === 0);
    case "isLoopback":
      return v4 ? b[0] === 127 : b.slice(0, 15).every((byte) => byte === 0) && b[15] === 1;
    case "isLinkLocalMulticast":
      return v4 ? b[0] === 224 && b[1] === 0 && b[2] === 0 : b[0] === 0xff && ((b[1] ?? 0) & 0x0f) === 0x02;
    case "isLinkLocalUnicast":
      return v4 ? b[0] === 169 && b[1] === 254 : b[0] === 0xfe && ((b[1] ?? 0) & 0xc0) === 0x80;
    case "isGlobalUnicast": {
      if (v4 && b.every((byte) => byte === 255)) return false;
      const multicast = v4 ? (b[0] ?? 0) >= 224 && (b[0] ?? 0) <= 239 : b[0] === 0xff;
      const unspecified = b.every((byte) => byte === 0);
      const loopback = ipMember("isLoopback", ip) === true;
      const linkLocal = ipMember("isLinkLocalUnicast", ip) === true;
      return !unspecified && !loopback && !multicast && !linkLocal;
    }
    default:
      return undefined;
  }
}
