// Organizations, projects (and the default project), billing state.
import type { Command } from "../command.ts";
import { NotFoundError } from "../errors.ts";
import { orDash, paintState } from "../output.ts";

const orgs: Command = {
  name: "orgs",
  summary: "list the organizations you can see",
  async run(ctx) {
    const organizations = await (await ctx.client()).organizations.list();
    ctx.out.list(organizations, [
      { header: "ID", value: (o) => o.id },
      { header: "NAME", value: (o) => o.name },
      { header: "PAYMENT-CUSTOMER", value: (o) => orDash(o.payment_customer_id) },
    ]);
    return 0;
  },
};

const projectsUse: Command = {
  name: "use",
  summary: "make a project the default for later commands (kept in config.json)",
  args: "<project-id>",
  minArgs: 1,
  async run(ctx, input) {
    const id = input.arg(0);
    const projects = await (await ctx.client()).projects.list();
    const project = projects.find((p) => p.id === id || p.name === id);
    if (project === undefined) {
      throw new NotFoundError(
        `no project '${id}' among the ${projects.length} you can see: 'gpuvmctl projects' lists them`,
      );
    }
    await ctx.store.updateConfig({ projectId: project.id });
    ctx.out.line(`Default project: ${project.id} (${project.name}).`);
    if (ctx.io.env.GPUCLOUD_PROJECT_ID && ctx.io.env.GPUCLOUD_PROJECT_ID !== project.id) {
      ctx.out.note("note: GPUCLOUD_PROJECT_ID is set and wins over the default project");
    }
    if (ctx.out.structured) ctx.out.data(project);
    return 0;
  },
};

const projects: Command = {
  name: "projects",
  summary: "list the projects you can see (the default one is marked *); 'projects use <id>' chooses it",
  subcommands: [projectsUse],
  async run(ctx) {
    const client = await ctx.client();
    const [list, organizations, configured] = await Promise.all([
      client.projects.list(),
      client.organizations.list(),
      ctx.configuredProject(),
    ]);
    const orgName = new Map(organizations.map((o) => [o.id, o.name]));
    const current = configured?.value ?? (list.length === 1 ? list[0]?.id : undefined);
    ctx.out.list(list, [
      { header: "ID", value: (p) => p.id },
      { header: "NAME", value: (p) => p.name },
      { header: "ORGANIZATION", value: (p) => orgName.get(p.organization_id) ?? p.organization_id },
      { header: "DEFAULT", value: (p) => (p.id === current ? "*" : ""), paint: () => "green" },
    ]);
    return 0;
  },
};

const billing: Command = {
  name: "billing",
  summary: "show whether the project's organization has a valid payment method, and its billing link",
  details: "Resources cannot be created until the organization has a payment method: enter one at the link.",
  async run(ctx) {
    const client = await ctx.client();
    const project = await client.projects.get(await ctx.projectId());
    const organization = project.organization;
    const link = await client.organizations.billingLink(organization.id);
    const valid = organization.hasValidPaymentMethod;
    const state = valid === undefined ? "unknown" : valid ? "valid" : "missing: add one at the billing link";
    ctx.out.details(
      [
        ["Project", `${project.name} (${project.id})`],
        ["Organization", `${organization.name} (${organization.id})`],
        ["Payment method", ctx.out.paint(state, paintState(valid === false ? "missing" : state) ?? "dim")],
        ["Billing link", link.url],
      ],
      {
        projectId: project.id,
        organization: { id: organization.id, name: organization.name },
        hasValidPaymentMethod: valid ?? null,
        billingUrl: link.url,
      },
    );
    return 0;
  },
};

export const TENANCY_COMMANDS: readonly Command[] = [orgs, projects, billing];
