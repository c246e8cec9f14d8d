// credentials-secret: the Secret the operator reads (apiKey, or email and password; projectId; apiUrl).
import { DEFAULT_CREDENTIALS_SECRET, SECRET_WATCH_LABEL } from "../../../api/common.ts";
import { isCloudError } from "../../../cloud/index.ts";
import type { Command } from "../command.ts";
import { AuthError } from "../errors.ts";
import { promptSecret, readSecretFromStdin } from "../io.ts";
import { toYaml } from "../output.ts";

const credentialsSecret: Command = {
  name: "credentials-secret",
  summary: "print the credentials Secret the operator needs, from the API key or the login",
  details:
    "With an API key (GPUCLOUD_API_KEY or --api-key) the Secret holds apiKey; after 'gpuvmctl login' it holds\n" +
    "email and a password, asked for without echo (or --password-stdin) and checked with one sign-in. Both\n" +
    "forms carry projectId and apiUrl. Pipe it to kubectl: nothing is written to disk.",
  flags: [
    {
      name: "name",
      type: "string",
      placeholder: "name",
      description: `Secret name (default ${DEFAULT_CREDENTIALS_SECRET})`,
    },
    {
      name: "namespace",
      short: "n",
      type: "string",
      placeholder: "namespace",
      description: "metadata.namespace (default: left out)",
    },
    { name: "password-stdin", type: "boolean", description: "read the password from standard input" },
  ],
  examples: ["gpuvmctl credentials-secret -n team-a | kubectl apply -f -"],
  async run(ctx, input) {
    const credential = await ctx.credential();
    if (credential === undefined) throw new AuthError("not signed in: run 'gpuvmctl login', or set GPUCLOUD_API_KEY");
    const url = await ctx.requireApiUrl();
    const projectId = await ctx.projectId();
    let secretData: Record<string, string>;
    if (credential.kind === "api-key") secretData = { apiKey: credential.apiKey };
    else {
      const { email } = credential.session;
      const password = input.bool("password-stdin")
        ? await readSecretFromStdin(ctx.io, "password")
        : await promptSecret(
            ctx.io,
            `Password of ${email} (for the Secret): `,
            "pipe the password in with --password-stdin",
          );
      try {
        await ctx.makeClient(url.value, { email, password }).auth.token();
      } catch (error) {
        if (isCloudError(error) && error.kind === "http" && [400, 401, 403].includes(error.status ?? 0)) {
          throw new AuthError(`that password does not sign ${email} in: ${error.message}`, { cause: error });
        }
        throw error;
      }
      secretData = { email, password };
    }
    const namespace = input.string("namespace");
    const secret = {
      apiVersion: "v1",
      kind: "Secret",
      type: "Opaque",
      metadata: {
        name: input.string("name") ?? DEFAULT_CREDENTIALS_SECRET,
        ...(namespace ? { namespace } : {}),
        // The operator reads only Secrets with this label.
        labels: { [SECRET_WATCH_LABEL]: "true" },
      },
      stringData: { ...secretData, projectId, apiUrl: url.value },
    };
    if (ctx.io.stdout.isTTY === true) ctx.out.note("note: this is a secret; pipe it: ... | kubectl apply -f -");
    if (ctx.out.format === "json") ctx.out.data(secret);
    else ctx.out.raw(toYaml(secret));
    return 0;
  },
};

export const CREDENTIALS_COMMANDS: readonly Command[] = [credentialsSecret];
