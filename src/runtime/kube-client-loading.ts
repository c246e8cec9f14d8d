// What the operator loads of @kubernetes/client-node. Its KubeConfig (config.js) imports the package's generated
// index, and with it every API class and model of Kubernetes: about a thousand modules whose source text and
// bytecode stay in memory for classes the operator never calls (its requests go through kube-http.ts and its own
// Lease client; what they cost: docs/scaling.md, ADR 0014). The runtime imports client-node's
// modules by path (config.js, watch.js, cache.js, gen/http, gen/apis/exception), never the package root, and
// `gpuvm-operator run` registers this resolve hook before it loads them: config.js gets the generated index
// without the APIs and models (createConfiguration and the request plumbing stay real), and cache.js (ListWatch)
// a serializer that passes its label and field selectors through as the real one does for strings.
// A client-node upgrade that changes these imports only loses the saving (the hook then matches nothing), or
// fails at startup with a missing export (the e2e tests start the operator this way).
import { registerHooks } from "node:module";

const DIST = "/@kubernetes/client-node/dist/";

/** The generated index (gen/index.js) minus models/all.js and the API classes. */
function slimGeneratedIndex(parentUrl: string): string {
  const at = (file: string): string => JSON.stringify(new URL(`./gen/${file}`, parentUrl).href);
  return [
    `export * from ${at("http/http.js")};`,
    `export * from ${at("auth/auth.js")};`,
    `export { createConfiguration } from ${at("configuration.js")};`,
    `export * from ${at("apis/exception.js")};`,
    `export * from ${at("servers.js")};`,
    `export { RequiredError } from ${at("apis/baseapi.js")};`,
    `export { Observable } from ${at("rxjsStub.js")};`,
  ].join("\n");
}

/** ListWatch serializes nothing but its selectors, strings, which the real serializer returns as they are. */
const SELECTOR_SERIALIZER = "export const ObjectSerializer = { serialize: (data) => data };";

function dataUrl(source: string): string {
  return `data:text/javascript,${encodeURIComponent(source)}`;
}

let registered = false;

/** Registers the hook (once per process); call before anything imports client-node. */
export function loadSlimKubeClient(): void {
  if (registered) return;
  registered = true;
  registerHooks({
    resolve(specifier, context, nextResolve) {
      const parent = context.parentURL ?? "";
      if (specifier === "./gen/index.js" && parent.endsWith(`${DIST}config.js`)) {
        return { url: dataUrl(slimGeneratedIndex(parent)), shortCircuit: true };
      }
      if (specifier === "./serializer.js" && parent.endsWith(`${DIST}cache.js`)) {
        return { url: dataUrl(SELECTOR_SERIALIZER), shortCircuit: true };
      }
      return nextResolve(specifier, context);
    },
  });
}
