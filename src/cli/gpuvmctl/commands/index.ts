// The gpuvmctl command tree. Each group lives in its own file; heavy modules (the Kubernetes client, the CRD
// validator) are imported inside the commands that need them, so that every command starts fast.
import type { Command } from "../command.ts";
import { AUTH_COMMANDS } from "./auth.ts";
import { CATALOGUE_COMMANDS } from "./catalogue.ts";
import { completionCommand } from "./completion.ts";
import { CREDENTIALS_COMMANDS } from "./credentials-secret.ts";
import { DISKS_COMMAND } from "./disks.ts";
import { FIREWALL_RULES_COMMAND } from "./firewall-rules.ts";
import { MANIFEST_COMMAND } from "./manifest.ts";
import { NETWORKS_COMMAND } from "./networks.ts";
import { OPERATIONS_COMMAND } from "./operations.ts";
import { SSH_COMMANDS } from "./ssh.ts";
import { TENANCY_COMMANDS } from "./tenancy.ts";
import { USAGE_COMMANDS } from "./usage.ts";
import { VMS_COMMAND } from "./vms.ts";

export const ROOT: Command = {
  name: "gpuvmctl",
  summary: "The command line for a GPU cloud account: sign-in, projects, catalogue, resources, usage and cost.",
  details:
    "Credentials: 'gpuvmctl login' (kept in ~/.config/gpuvmctl), or GPUCLOUD_API_KEY with GPUCLOUD_API_URL.\n" +
    "Exit codes: 0 ok, 1 other failure, 2 usage, 3 authentication, 4 not found, 5 API. Docs: docs/cli.md.",
  subcommands: [
    ...AUTH_COMMANDS,
    ...TENANCY_COMMANDS,
    ...CATALOGUE_COMMANDS,
    VMS_COMMAND,
    DISKS_COMMAND,
    NETWORKS_COMMAND,
    FIREWALL_RULES_COMMAND,
    OPERATIONS_COMMAND,
    ...USAGE_COMMANDS,
    MANIFEST_COMMAND,
    ...CREDENTIALS_COMMANDS,
    ...SSH_COMMANDS,
    completionCommand(() => ROOT),
  ],
};
