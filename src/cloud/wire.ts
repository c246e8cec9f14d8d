// Wire schemas of the GPU VM service API v0.1 (../shared/spec/gpu-vm-service-api-v0.1.md) with the gaps
// filled by ../shared/spec/contract-decisions.md and docs/api-contract.md.
//
// This file is the single contract shared by the client (src/cloud) and the simulator (src/simulator), and the one
// entry other folders import: the catalogue of the spec's tables (wire/catalogue.ts), what the schemas share
// (wire/common.ts), the answers, tolerant (wire/resources.ts), and the requests, strict (wire/requests.ts).
export * from "./wire/catalogue.ts";
export * from "./wire/common.ts";
export * from "./wire/requests.ts";
export * from "./wire/resources.ts";
