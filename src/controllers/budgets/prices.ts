// The price table in force: the seed's (admission/prices.ts), overridden by the ConfigMap gpuvm-operator-prices in
// the operator's own namespace (key prices.yaml; the Helm chart renders it from its `prices` values). A malformed
// file is refused whole and logged: the last good table stays in force (prices are never half applied); the
// ConfigMap deleted, the seed's prices apply again.
import type { Logger } from "pino";
import {
  DEFAULT_PRICES,
  PRICES_CONFIGMAP_KEY,
  PRICES_CONFIGMAP_NAME,
  type PriceTable,
  parsePriceOverrides,
} from "../../admission/prices.ts";
import { CONFIG_MAPS, type Manager } from "../../runtime/index.ts";

export interface PriceSource {
  current(): PriceTable;
}

type PricesConfigMap = { metadata?: { resourceVersion?: string }; data?: Record<string, string> };

/** Follow the prices ConfigMap of `namespace` (the operator's). */
export function watchPrices(manager: Manager, namespace: string, logger: Logger): PriceSource {
  const informer = manager.informerForObject<PricesConfigMap & { metadata?: object }>(
    CONFIG_MAPS,
    namespace,
    PRICES_CONFIGMAP_NAME,
  );
  let table = DEFAULT_PRICES;
  const source = `ConfigMap ${namespace}/${PRICES_CONFIGMAP_NAME} key ${PRICES_CONFIGMAP_KEY}`;
  informer.on((event) => {
    if (event.type === "delete") {
      table = DEFAULT_PRICES;
      logger.info({ source }, "price overrides removed: the seed's prices apply");
      return;
    }
    const text = event.object.data?.[PRICES_CONFIGMAP_KEY];
    try {
      table = text === undefined ? DEFAULT_PRICES : parsePriceOverrides(text, source);
      logger.info({ prices: table.describe() }, "prices in force");
    } catch (error) {
      logger.error({ err: error }, "price overrides refused; the last good prices stay in force");
    }
  });
  return { current: () => table };
}
