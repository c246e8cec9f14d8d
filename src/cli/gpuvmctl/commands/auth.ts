// Sign-in and settings: login, logout, whoami, change-password, config.
import { isCloudError } from "../../../cloud/index.ts";
import type { Command } from "../command.ts";
import type { Context } from "../context.ts";
import { AuthError, UsageError } from "../errors.ts";
import { promptLine, promptSecret, readAll, readSecretFromStdin } from "../io.ts";
import { sessionFromToken } from "../session.ts";

function isoTime(ms: number): string {
  return `${new Date(ms).toISOString().slice(0, 19)}Z`;
}

/** After a sign-in: keep the configured project if this user sees it, else adopt the only one. */
async function chooseDefaultProject(ctx: Context): Promise<string> {
  const projects = await (await ctx.client()).projects.list();
  const configured = (await ctx.store.readConfig()).projectId;
  if (configured !== undefined && projects.some((p) => p.id === configured)) return `Default project: ${configured}`;
  const [only] = projects;
  if (projects.length === 1 && only !== undefined) {
    await ctx.store.updateConfig({ projectId: only.id });
    return `Default project: ${only.id} (${only.name})`;
  }
  await ctx.store.updateConfig({ projectId: undefined });
  return `You can see ${projects.length} projects: choose one with 'gpuvmctl projects use <id>' (list: 'gpuvmctl projects')`;
}

const login: Command = {
  name: "login",
  summary: "sign in with email and password; the tokens are kept (0600) and renewed as needed",
  details:
    "The password is asked for without echo on a terminal, or read from the first line of standard input with\n" +
    "--password-stdin. It is never stored: only the access and refresh tokens are, in the config directory\n" +
    "($GPUVMCTL_CONFIG_DIR, $XDG_CONFIG_HOME/gpuvmctl or ~/.config/gpuvmctl). The API URL is remembered too.",
  flags: [
    { name: "email", type: "string", placeholder: "address", description: "account email (asked for when left out)" },
    { name: "password-stdin", type: "boolean", description: "read the password from standard input" },
  ],
  examples: [
    "gpuvmctl login --api-url https://api.example.com/v0.1 --email me@example.com",
    "pass show gpucloud | gpuvmctl login --email me@example.com --password-stdin",
  ],
  async run(ctx, input) {
    const url = await ctx.requireApiUrl();
    const email = input.string("email") ?? (await promptLine(ctx.io, "Email: ", "pass --email <address>")).trim();
    if (email === "") throw new UsageError("login: the email is empty");
    const password = input.bool("password-stdin")
      ? await readSecretFromStdin(ctx.io, "password")
      : await promptSecret(
          ctx.io,
          "Password: ",
          "pipe the password in with --password-stdin (printf '%s\\n' \"$PASSWORD\" | gpuvmctl login … --password-stdin)",
        );
    if (password === "") throw new UsageError("login: the password is empty");
    const client = ctx.makeClient(url.value, { email, password });
    let answer: Awaited<ReturnType<typeof client.auth.token>>;
    try {
      answer = await client.auth.token();
    } catch (error) {
      if (isCloudError(error) && error.kind === "http" && [400, 401, 403].includes(error.status ?? 0)) {
        throw new AuthError(`sign-in refused for ${email} at ${url.value}: ${error.message}`, { cause: error });
      }
      throw error;
    }
    const signedInAt = isoTime(ctx.io.now());
    const session = sessionFromToken(answer, { apiUrl: url.value, email, signedInAt }, ctx.io.now());
    await ctx.store.writeSession(session);
    await ctx.store.updateConfig({ apiUrl: url.value });
    ctx.out.line(`Signed in to ${url.value} as ${email} (token valid until ${isoTime(session.expiresAtMs)}).`);
    if (ctx.io.env.GPUCLOUD_API_KEY) ctx.out.note("note: GPUCLOUD_API_KEY is set and is used instead of this sign-in");
    else ctx.out.line(await chooseDefaultProject(ctx));
    if (ctx.out.structured) ctx.out.data({ apiUrl: url.value, email, expiresAt: isoTime(session.expiresAtMs) });
    return 0;
  },
};

const logout: Command = {
  name: "logout",
  summary: "forget the stored sign-in (the tokens); settings such as the default project stay",
  async run(ctx) {
    const removed = await ctx.store.deleteSession();
    ctx.out.line(removed ? `Signed out (removed ${ctx.store.sessionFile}).` : "Not signed in.");
    return 0;
  },
};

const whoami: Command = {
  name: "whoami",
  summary: "show who the credential is and check that the API accepts it",
  async run(ctx) {
    const credential = await ctx.credential();
    if (credential === undefined) throw new AuthError("not signed in: run 'gpuvmctl login', or set GPUCLOUD_API_KEY");
    const url = await ctx.requireApiUrl();
    const client = await ctx.client();
    const [organizations, projects] = await Promise.all([client.organizations.list(), client.projects.list()]);
    const who =
      credential.kind === "session"
        ? { kind: "user", email: credential.session.email, expiresAt: isoTime(credential.session.expiresAtMs) }
        : { kind: "api-key", email: "" };
    const configured = await ctx.configuredProject();
    const raw = {
      ...who,
      credentialSource: credential.source,
      apiUrl: url.value,
      organizations: organizations.map((o) => ({ id: o.id, name: o.name })),
      projects: projects.map((p) => ({ id: p.id, name: p.name })),
      defaultProject: configured?.value ?? (projects.length === 1 ? projects[0]?.id : undefined),
    };
    ctx.out.details(
      [
        ["User", who.kind === "user" ? who.email : `API key (${credential.source})`],
        ["API URL", url.value],
        ["Organizations", organizations.map((o) => `${o.name} (${o.id})`).join(", ") || "-"],
        ["Projects", projects.map((p) => `${p.name} (${p.id})`).join(", ") || "-"],
        ["Project", raw.defaultProject ?? "not chosen: gpuvmctl projects use <id>"],
        ...(who.kind === "user" ? ([["Token valid until", who.expiresAt ?? ""]] as const) : []),
      ],
      raw,
    );
    return 0;
  },
};

const changePassword: Command = {
  name: "change-password",
  summary: "change the password of the signed-in user",
  details:
    "Asks for the current password and twice for the new one (at least 8 characters), without echo. With\n" +
    "--password-stdin, standard input holds two lines: the current password, then the new one.",
  flags: [{ name: "password-stdin", type: "boolean", description: "read both passwords from standard input" }],
  async run(ctx, input) {
    const credential = await ctx.credential();
    if (credential?.kind !== "session") {
      throw new AuthError("change-password needs a sign-in, not an API key: run 'gpuvmctl login' first");
    }
    let current: string;
    let next: string;
    if (input.bool("password-stdin")) {
      if (ctx.io.stdin.isTTY === true) throw new UsageError("--password-stdin reads a pipe, not a terminal");
      const lines = (await readAll(ctx.io.stdin)).split(/\r?\n/);
      current = lines[0] ?? "";
      next = lines[1] ?? "";
      if (current === "" || next === "") {
        throw new UsageError("--password-stdin: expected two lines, the current password and the new one");
      }
    } else {
      const instead = "pipe the current and the new password in, one a line, with --password-stdin";
      current = await promptSecret(ctx.io, "Current password: ", instead);
      next = await promptSecret(ctx.io, "New password: ", instead);
      if ((await promptSecret(ctx.io, "Repeat the new password: ", instead)) !== next) {
        throw new UsageError("the new passwords differ; nothing was changed");
      }
    }
    if (next.length < 8) throw new UsageError("the new password needs at least 8 characters; nothing was changed");
    const client = await ctx.client();
    try {
      await client.auth.changePassword({ current_password: current, new_password: next });
    } catch (error) {
      if (isCloudError(error) && error.status === 400) {
        throw new AuthError(`password not changed: ${error.message}`, { cause: error });
      }
      throw error;
    }
    ctx.out.line(`Password changed for ${credential.session.email}.`);
    return 0;
  },
};

const config: Command = {
  name: "config",
  summary: "show the API URL, credential and project in use, and where each comes from (never a secret)",
  async run(ctx) {
    const [url, credential, project] = await Promise.all([ctx.apiUrl(), ctx.credential(), ctx.configuredProject()]);
    const session = await ctx.store.readSession();
    const shadowed = credential?.kind === "api-key" && session !== undefined;
    const credentialText =
      credential === undefined
        ? "none: run 'gpuvmctl login', or set GPUCLOUD_API_KEY"
        : credential.kind === "api-key"
          ? `API key from ${credential.source}${shadowed ? ` (the sign-in of ${session.email} is not used)` : ""}`
          : `sign-in of ${credential.session.email} from ${credential.source}, token valid until ${isoTime(credential.session.expiresAtMs)}`;
    const raw = {
      configDir: ctx.store.dir,
      apiUrl: url ?? null,
      credential:
        credential === undefined
          ? null
          : credential.kind === "api-key"
            ? { kind: "api-key", source: credential.source }
            : {
                kind: "session",
                source: credential.source,
                email: credential.session.email,
                expiresAt: isoTime(credential.session.expiresAtMs),
              },
      project: project ?? null,
    };
    ctx.out.details(
      [
        ["Config directory", ctx.store.dir],
        ["API URL", url === undefined ? "none: --api-url or GPUCLOUD_API_URL" : `${url.value} (from ${url.source})`],
        ["Credential", credentialText],
        [
          "Project",
          project === undefined
            ? "not set: the credential's only project is used ('gpuvmctl projects use <id>' sets one)"
            : `${project.value} (from ${project.source})`,
        ],
      ],
      raw,
    );
    return 0;
  },
};

export const AUTH_COMMANDS: readonly Command[] = [login, logout, whoami, changePassword, config];
