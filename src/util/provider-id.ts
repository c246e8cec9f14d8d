// The providerID of a VM of this cloud, as a Kubernetes Node (`spec.providerID`, set by the kubelet's
// --provider-id or a cloud controller manager) and a Cluster API infrastructure machine carry it: one format,
// `gpucloud://<vm id>`, so that Cluster API can match a Machine to its Node. The VM id is unique in the cloud,
// so neither project nor location is part of it.

export const PROVIDER_ID_SCHEME = "gpucloud";
const PREFIX = `${PROVIDER_ID_SCHEME}://`;
/** A VM id as the cloud gives it (a UUID), or anything of letters, digits, '-', '_' and '.'. */
const VM_ID_PATTERN = /^[A-Za-z0-9][-A-Za-z0-9_.]{0,127}$/;
/** `gpucloud://<vm id>`, for the CRD's rule and for parsers. */
export const PROVIDER_ID_PATTERN = /^gpucloud:\/\/[A-Za-z0-9][-A-Za-z0-9_.]{0,127}$/;

/** `gpucloud://<vmId>`. Throws on an id that cannot be one (empty, a slash, a space …). */
export function providerIdOf(vmId: string): string {
  if (!VM_ID_PATTERN.test(vmId)) throw new Error(`"${vmId.slice(0, 64)}" is not a VM id`);
  return `${PREFIX}${vmId}`;
}

/** The VM id of a `gpucloud://<vm id>` providerID; undefined for any other text. */
export function vmIdOfProviderId(providerId: string): string | undefined {
  return PROVIDER_ID_PATTERN.test(providerId) ? providerId.slice(PREFIX.length) : undefined;
}
