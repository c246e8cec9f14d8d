// The catalogue below a project: locations, images, specs (the VM types' hardware) and availabilities.
import { AvailabilityItem, Image, SpecItem, StringItems } from "../wire.ts";
import { type Call, type CallOptions, listOf, projectGet } from "./shared.ts";

const Images = listOf(Image);
const Specs = listOf(SpecItem);
const Availabilities = listOf(AvailabilityItem);

export function catalogueEndpoints(call: Call) {
  return {
    async locations(projectId: string, opts: CallOptions = {}): Promise<string[]> {
      const { p, endpoint } = projectGet(projectId, "/locations", StringItems, opts);
      return (await call({ ...endpoint, path: `projects/${p}/locations` })).items;
    },
    async images(projectId: string, opts: CallOptions = {}) {
      const { p, endpoint } = projectGet(projectId, "/images", Images, opts);
      return call({ ...endpoint, path: `projects/${p}/images` });
    },
    async specs(projectId: string, opts: CallOptions = {}) {
      const { p, endpoint } = projectGet(projectId, "/specs", Specs, opts);
      return call({ ...endpoint, path: `projects/${p}/specs` });
    },
    async availabilities(
      projectId: string,
      query: { product_name?: string; location?: string } = {},
      opts: CallOptions = {},
    ) {
      const { p, endpoint } = projectGet(projectId, "/availabilities", Availabilities, opts);
      const q = { product_name: query.product_name, location: query.location };
      return call({ ...endpoint, path: `projects/${p}/availabilities`, query: q });
    },
  };
}
