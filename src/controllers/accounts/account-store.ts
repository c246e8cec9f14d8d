// The operator's credential store: one CloudAccount per credentials Secret in use, built with the operator's
// limits for its cloud client (rate, account concurrency, timeouts, the leadership fence) and metrics for every
// request and settled operation. What an account learns that concerns objects (resources gone or changed, an
// operation settled) goes to the wakes it is given: accounts know no kind and no controller.
import type { Logger } from "pino";
import type { OperationFamily } from "../../cloud/wire.ts";
import type { Manager } from "../../runtime/index.ts";
import { ApiUrlPolicy } from "../../util/api-url.ts";
import { type Account, accountOf } from "./account.ts";
import { CloudAccount } from "./cloud-account.ts";
import { CredentialStore, clientFor } from "./credentials.ts";
import type { SecretSources } from "./secret-sources.ts";

/** Whom an account's news wakes (the controllers of the kinds whose resources it holds). */
export interface AccountWakes {
  /** Resources of a family that a list showed gone (`high`) or changed (`normal`). */
  holders(family: OperationFamily, account: Account, ids: string[], priority: "high" | "normal"): void;
  /** An operation settled: the key that owns it, and the families it changed as a side effect. */
  settled(family: OperationFamily, ownerKey: string, affected: readonly OperationFamily[]): void;
}

export function createCredentialStore(
  manager: Manager,
  secrets: SecretSources,
  wakes: AccountWakes,
  logger: Logger,
  /** Whether an account's VM snapshot holds the VM of this id (sharding: its holder is this shard's); default all. */
  holdsVm?: (account: Account, id: string) => boolean,
): CredentialStore<CloudAccount> {
  const config = manager.config;
  const allowed = secrets.allowedNamespaces;
  // The cloud layer names its own component (cloud-client, operation-tracker, cloud-account): its loggers come
  // from the manager's, without one (pino writes a child's binding beside its parent's, not over it).
  const cloudLogger = (credentialKey: string) => manager.logger.child({ credentialKey });
  return new CredentialStore<CloudAccount>({
    secrets: { getSecret: secrets.read },
    defaultNamed: { getSecret: (namespace, name) => secrets.defaultNamed.get(namespace, name) },
    ...(allowed ? { mayUseDefault: (namespace: string) => allowed.get("", namespace) !== undefined } : {}),
    ...(config.credentialsSecret ? { defaultSecret: config.credentialsSecret } : {}),
    ...(config.apiUrl ? { defaultApiUrl: config.apiUrl } : {}),
    apiUrls: new ApiUrlPolicy(config.allowedApiUrls),
    logger,
    build: (parsed, credentialKey) => {
      const account = accountOf(parsed.apiUrl, parsed.projectId);
      return new CloudAccount({
        client: clientFor(parsed, credentialKey, {
          ratePerSec: config.apiRateLimit,
          burst: config.apiBurst,
          accountConcurrency: config.apiAccountConcurrency,
          timeoutMs: config.apiTimeoutMs,
          maxResponseBytes: config.apiMaxResponseBytes,
          fence: manager.fence,
          userAgent: manager.userAgent,
          observer: (event) => {
            const code = String(event.status);
            manager.metrics.cloudApiRequestsTotal.inc({ method: event.method, route: event.route, code });
            manager.metrics.cloudApiRequestDurationSeconds.observe(
              { method: event.method, route: event.route },
              event.durationMs / 1000,
            );
          },
          logger: cloudLogger(credentialKey),
        }),
        projectId: parsed.projectId,
        apiUrl: parsed.apiUrl,
        credentialKey,
        onGone: (family, ids) => wakes.holders(family, account, ids, "high"),
        onChanged: (family, ids) => wakes.holders(family, account, ids, "normal"),
        ...(holdsVm !== undefined ? { holdsVm: (id: string) => holdsVm(account, id) } : {}),
        snapshotMaxAgeMs: config.syncPeriodMs,
        pollIntervalMs: Math.min(config.pollIntervalMs, config.syncPeriodMs),
        operationPollMs: config.operationPollIntervalMs,
        operationPolling: config.operationPolling,
        logger: cloudLogger(credentialKey),
        wake: (family, ownerKey, affected) => wakes.settled(family, ownerKey, affected),
        onOperationSettled: (family, operation, result, durationMs) =>
          manager.metrics.cloudOperationDurationSeconds.observe({ family, operation, result }, durationMs / 1000),
      });
    },
    dispose: (account) => account.stop(),
  });
}
