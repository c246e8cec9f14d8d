// manifest vm|disk|network|rule: a GpuVm/GpuDisk/GpuNetwork/GpuFirewallRule from flags, checked against the
// CRD schema (and the one-of rules) exactly as check:manifests checks files, printed as YAML for kubectl apply.
import { readFile } from "node:fs/promises";
import { homedir } from "node:os";
import path from "node:path";
import { API_VERSION, DEFAULT_CREDENTIALS_SECRET } from "../../../api/common.ts";
import { OBJECT_NAME_PATTERN } from "../../../api/fields.ts";
import {
  BLOCK_SIZES,
  DISK_MODES,
  DISK_TYPES,
  FIREWALL_ACTIONS,
  FIREWALL_DIRECTIONS,
  FIREWALL_PROTOCOLS,
  VM_TYPES,
} from "../../../cloud/wire.ts";
import type { Command, Flag } from "../command.ts";
import type { Context } from "../context.ts";
import { UsageError } from "../errors.ts";
import type { Input } from "../input.ts";
import { toYaml } from "../output.ts";

const COMMON_FLAGS: readonly Flag[] = [
  {
    name: "namespace",
    short: "n",
    type: "string",
    placeholder: "namespace",
    description: "metadata.namespace (default: left out, kubectl's namespace)",
  },
  {
    name: "credentials-secret",
    type: "string",
    placeholder: "name",
    description: `spec.credentialsRef.name (default ${DEFAULT_CREDENTIALS_SECRET})`,
  },
  {
    name: "cloud-name",
    type: "string",
    placeholder: "name",
    description: "spec.cloudName (default <namespace>-<name>)",
  },
  {
    name: "orphan",
    type: "boolean",
    description: "deletionPolicy: Orphan (keep the cloud resource when the object is deleted)",
  },
];

type Spec = Record<string, unknown>;

function objectOf(kind: string, input: Input, spec: Spec) {
  const namespace = input.string("namespace");
  const credentials = input.string("credentials-secret");
  const cloudName = input.string("cloud-name");
  return {
    apiVersion: API_VERSION,
    kind,
    metadata: { name: input.arg(0), ...(namespace === undefined ? {} : { namespace }) },
    spec: {
      ...spec,
      ...(cloudName === undefined ? {} : { cloudName }),
      ...(credentials === undefined ? {} : { credentialsRef: { name: credentials } }),
      ...(input.bool("orphan") ? { deletionPolicy: "Orphan" } : {}),
    },
  };
}

/** A namespace is a DNS label. */
const NAMESPACE_PATTERN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** The checks of metadata the API server makes before the schema (names are not in the CRD schema). */
function metadataProblems(metadata: { name: string; namespace?: string }): string[] {
  const problems: string[] = [];
  if (metadata.name.length > 253 || !OBJECT_NAME_PATTERN.test(metadata.name)) {
    problems.push(`/metadata/name '${metadata.name}' is not a Kubernetes name (lowercase letters, digits, '-', '.')`);
  }
  const { namespace } = metadata;
  if (namespace !== undefined && (namespace.length > 63 || !NAMESPACE_PATTERN.test(namespace))) {
    problems.push(`/metadata/namespace '${namespace}' is not a namespace name (lowercase letters, digits, '-')`);
  }
  return problems;
}

/** Validates like the API server would (metadata, schema, rules), then prints. */
async function emit(ctx: Context, object: ReturnType<typeof objectOf>): Promise<number> {
  const { createManifestValidator } = await import("../../../api/validate.ts");
  const problems = [...metadataProblems(object.metadata), ...createManifestValidator().check(object).problems];
  if (problems.length > 0) {
    throw new UsageError(`the ${object.kind} would be rejected: ${problems.join("; ")}`);
  }
  if (ctx.out.format === "json") ctx.out.data(object);
  else ctx.out.raw(toYaml(object));
  return 0;
}

const SSH_KEY_FILES = ["id_ed25519.pub", "id_ecdsa.pub", "id_rsa.pub"];

/** `--ssh-key` is a key line or a file; without it, the first of ~/.ssh/id_{ed25519,ecdsa,rsa}.pub. */
async function sshKeyOf(ctx: Context, input: Input): Promise<string | undefined> {
  const given = input.string("ssh-key");
  if (given !== undefined && /^(ssh-|ecdsa-|sk-)/.test(given)) return given.trim();
  const home = ctx.io.env.HOME || homedir();
  const candidates =
    given !== undefined
      ? [given.startsWith("~/") ? path.join(home, given.slice(2)) : given]
      : SSH_KEY_FILES.map((f) => path.join(home, ".ssh", f));
  for (const file of candidates) {
    try {
      return (await readFile(file, "utf8")).trim();
    } catch (error) {
      if (given !== undefined) throw new UsageError(`--ssh-key: cannot read ${file}: ${(error as Error).message}`);
    }
  }
  return undefined;
}

/** `name` or `name:read-only` → a disk entry (a GpuDisk reference, or a cloud id with --disk-id). */
function diskEntries(input: Input, flag: string, field: "diskRef" | "id"): Spec[] {
  return input.list(flag).map((value) => {
    const [ref = "", mode] = value.split(":");
    if (mode !== undefined && !(DISK_MODES as readonly string[]).includes(mode)) {
      throw new UsageError(`--${flag} ${value}: the mode after ':' is ${DISK_MODES.join(" or ")}`);
    }
    return { ...(field === "diskRef" ? { diskRef: { name: ref } } : { id: ref }), ...(mode ? { mode } : {}) };
  });
}

const vm: Command = {
  name: "vm",
  summary: "a GpuVm: type, location(s), SSH key, image, disks, power state",
  args: "<name>",
  minArgs: 1,
  flags: [
    {
      name: "type",
      type: "string",
      placeholder: "type",
      description: "VM type (required; see 'gpuvmctl suggest')",
      choices: VM_TYPES,
    },
    {
      name: "location",
      type: "string",
      multiple: true,
      placeholder: "location",
      description: "location(s) to try in order (required)",
    },
    { name: "image", type: "string", placeholder: "image", description: "OS image name (see 'gpuvmctl images')" },
    {
      name: "ssh-key",
      type: "string",
      placeholder: "file|key",
      description: "public key line or file (default ~/.ssh/id_ed25519.pub, id_ecdsa.pub, id_rsa.pub)",
    },
    {
      name: "ssh-key-secret",
      type: "string",
      placeholder: "secret/key",
      description: "take the public key from a Secret key instead",
    },
    { name: "startup-script", type: "string", placeholder: "file", description: "startup script file, inlined" },
    {
      name: "disk",
      type: "string",
      multiple: true,
      placeholder: "name[:mode]",
      description: "a GpuDisk to attach (mode read-write or read-only)",
    },
    {
      name: "disk-id",
      type: "string",
      multiple: true,
      placeholder: "id[:mode]",
      description: "an existing cloud disk to attach",
    },
    { name: "stopped", type: "boolean", description: "powerState: Stopped" },
    {
      name: "connection-secret",
      type: "string",
      placeholder: "name",
      description: "write the IPs and SSH destination to this Secret",
    },
    ...COMMON_FLAGS,
  ],
  examples: ["gpuvmctl manifest vm trainer --type a100-80gb.8x --location us-east1-a,eu-north1-a | kubectl apply -f -"],
  async run(ctx, input) {
    const type = input.string("type");
    if (type === undefined)
      throw new UsageError("manifest vm: --type is required ('gpuvmctl suggest --gpus N' finds one)");
    const locations = input.list("location");
    if (locations.length === 0)
      throw new UsageError("manifest vm: --location is required (one, or several to try in order)");
    const secretRef = input.string("ssh-key-secret");
    let sshKey: Spec;
    if (secretRef !== undefined) {
      const [name = "", key = ""] = secretRef.split("/");
      sshKey = { sshPublicKeySecretRef: { name, key } };
    } else {
      const key = await sshKeyOf(ctx, input);
      if (key === undefined) {
        throw new UsageError("manifest vm: no ~/.ssh/id_*.pub found: pass --ssh-key <file|key> or --ssh-key-secret");
      }
      sshKey = { sshPublicKey: key };
    }
    const scriptFile = input.string("startup-script");
    const startupScript =
      scriptFile === undefined
        ? undefined
        : await readFile(scriptFile, "utf8").catch((error: Error) => {
            throw new UsageError(`--startup-script: cannot read ${scriptFile}: ${error.message}`);
          });
    const disks = [...diskEntries(input, "disk", "diskRef"), ...diskEntries(input, "disk-id", "id")];
    const connection = input.string("connection-secret");
    return emit(
      ctx,
      objectOf("GpuVm", input, {
        type,
        ...(locations.length === 1 ? { location: locations[0] } : { locations }),
        ...(input.string("image") === undefined ? {} : { image: input.string("image") }),
        ...sshKey,
        ...(startupScript === undefined ? {} : { startupScript }),
        ...(disks.length > 0 ? { disks } : {}),
        ...(input.bool("stopped") ? { powerState: "Stopped" } : {}),
        ...(connection === undefined ? {} : { connectionDetails: { secretName: connection } }),
      }),
    );
  },
};

const disk: Command = {
  name: "disk",
  summary: "a GpuDisk: size, location, type, block size",
  args: "<name>",
  minArgs: 1,
  flags: [
    { name: "size", type: "string", placeholder: "size", description: "512GiB, 1TiB ... (required)" },
    {
      name: "location",
      type: "string",
      placeholder: "location",
      description: "location (required; a VM attaches disks of its location)",
    },
    {
      name: "type",
      type: "string",
      placeholder: "type",
      description: "persistent-ssd (default) or shared-volume",
      choices: DISK_TYPES,
    },
    {
      name: "block-size",
      type: "string",
      placeholder: "bytes",
      description: "512 or 4096 (default)",
      choices: BLOCK_SIZES.map(String),
    },
    ...COMMON_FLAGS,
  ],
  async run(ctx, input) {
    const size = input.string("size");
    const location = input.string("location");
    if (size === undefined || location === undefined)
      throw new UsageError("manifest disk: --size and --location are required");
    const blockSize = input.string("block-size");
    return emit(
      ctx,
      objectOf("GpuDisk", input, {
        size,
        location,
        ...(input.string("type") === undefined ? {} : { type: input.string("type") }),
        ...(blockSize === undefined ? {} : { blockSize: Number(blockSize) }),
      }),
    );
  },
};

const network: Command = {
  name: "network",
  summary: "a GpuNetwork: a VPC network with its CIDR",
  args: "<name>",
  minArgs: 1,
  flags: [
    { name: "cidr", type: "string", placeholder: "cidr", description: "IPv4 range (default 10.0.0.0/16)" },
    ...COMMON_FLAGS,
  ],
  async run(ctx, input) {
    const cidr = input.string("cidr");
    return emit(ctx, objectOf("GpuNetwork", input, cidr === undefined ? {} : { cidr }));
  },
};

/** `0.0.0.0/0` → cidr, `vm:trainer` → vmRef, `id:<uuid>` → resourceId. */
function endpointsOf(input: Input, flag: string): Spec[] {
  return input.list(flag).map((value) => {
    if (value.startsWith("vm:")) return { vmRef: { name: value.slice(3) } };
    if (value.startsWith("id:")) return { resourceId: value.slice(3) };
    return { cidr: value };
  });
}

const rule: Command = {
  name: "rule",
  summary: "a GpuFirewallRule: network, direction, action, protocols, sources, destinations, ports",
  args: "<name>",
  minArgs: 1,
  flags: [
    { name: "network", type: "string", placeholder: "name", description: "the GpuNetwork it belongs to" },
    { name: "network-id", type: "string", placeholder: "id", description: "or an existing cloud network id" },
    {
      name: "direction",
      type: "string",
      placeholder: "dir",
      description: "ingress (default) or egress",
      choices: FIREWALL_DIRECTIONS,
    },
    {
      name: "action",
      type: "string",
      placeholder: "action",
      description: "allow (default) or deny",
      choices: FIREWALL_ACTIONS,
    },
    {
      name: "protocol",
      type: "string",
      multiple: true,
      placeholder: "proto",
      description: "tcp (default), udp, icmp",
      choices: FIREWALL_PROTOCOLS,
    },
    {
      name: "source",
      type: "string",
      multiple: true,
      placeholder: "endpoint",
      description: "CIDR, vm:<GpuVm> or id:<resource id>",
    },
    {
      name: "destination",
      type: "string",
      multiple: true,
      placeholder: "endpoint",
      description: "CIDR, vm:<GpuVm> or id:<resource id>",
    },
    {
      name: "port",
      type: "string",
      multiple: true,
      placeholder: "port",
      description: "destination port or range (22, 8000-9000)",
    },
    { name: "source-port", type: "string", multiple: true, placeholder: "port", description: "source port or range" },
    ...COMMON_FLAGS,
  ],
  examples: ["gpuvmctl manifest rule ssh --network default-net --source 0.0.0.0/0 --port 22 --destination vm:trainer"],
  async run(ctx, input) {
    const networkName = input.string("network");
    const networkId = input.string("network-id");
    if ((networkName === undefined) === (networkId === undefined)) {
      throw new UsageError("manifest rule: give exactly one of --network and --network-id");
    }
    const protocols = input.list("protocol");
    const sources = endpointsOf(input, "source");
    const destinations = endpointsOf(input, "destination");
    return emit(
      ctx,
      objectOf("GpuFirewallRule", input, {
        ...(networkName === undefined ? { networkId } : { networkRef: { name: networkName } }),
        direction: input.string("direction") ?? "ingress",
        action: input.string("action") ?? "allow",
        protocols: protocols.length > 0 ? protocols : ["tcp"],
        ...(sources.length > 0 ? { sources } : {}),
        ...(destinations.length > 0 ? { destinations } : {}),
        ...(input.list("port").length > 0 ? { destinationPorts: input.list("port") } : {}),
        ...(input.list("source-port").length > 0 ? { sourcePorts: input.list("source-port") } : {}),
      }),
    );
  },
};

export const MANIFEST_COMMAND: Command = {
  name: "manifest",
  summary: "print a GpuVm, GpuDisk, GpuNetwork or GpuFirewallRule from flags, checked against the CRD schema",
  details: "The output is YAML for 'kubectl apply -f -' (-o json for JSON). Nothing is sent to the cloud.",
  subcommands: [vm, disk, network, rule],
};
