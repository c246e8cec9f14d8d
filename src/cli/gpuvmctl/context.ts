// What every command shares: the output, the config files, and the three settings with their sources
// (API URL, credential, project), each resolved flag > environment > stored, and the cloud client built from them.
import pino from "pino";
import { type CloudClient, type Credentials, createCloudClient } from "../../cloud/index.ts";
import { ConfigStore, configDirOf, type StoredSession } from "./config-store.ts";
import { AuthError, UsageError } from "./errors.ts";
import type { Input } from "./input.ts";
import type { Io } from "./io.ts";
import { Output, type OutputFormat } from "./output.ts";
import { fileSession } from "./session.ts";

export interface Sourced<T> {
  value: T;
  /** Where it came from, for `gpuvmctl config`: `--api-url`, `GPUCLOUD_API_URL`, a file. */
  source: string;
}

export type CredentialSource =
  | { kind: "api-key"; apiKey: string; source: string }
  | { kind: "session"; session: StoredSession; source: string };

const SIGN_IN_HINT = "run 'gpuvmctl login', or set GPUCLOUD_API_KEY (and GPUCLOUD_API_URL)";

export function checkApiUrl(url: string, source: string): string {
  if (!/^https?:\/\/[^\s/]+/.test(url)) throw new UsageError(`${source}: expected an http(s) URL, got '${url}'`);
  return url.replace(/\/+$/, "");
}

export class Context {
  readonly io: Io;
  readonly out: Output;
  readonly store: ConfigStore;
  readonly #input: Input;
  #client: CloudClient | undefined;
  #project: Sourced<string> | undefined;

  constructor(io: Io, input: Input) {
    this.io = io;
    this.#input = input;
    this.out = new Output(io, {
      format: (input.string("output") ?? "table") as OutputFormat,
      noHeaders: input.bool("no-headers"),
      noColor: input.bool("no-color"),
    });
    this.store = new ConfigStore(configDirOf(io.env));
  }

  get debug(): boolean {
    return this.#input.bool("debug");
  }

  /** The API URL from the flag, the environment, the sign-in or the config file; undefined when none. */
  async apiUrl(): Promise<Sourced<string> | undefined> {
    const flag = this.#input.string("api-url");
    if (flag !== undefined) return { value: checkApiUrl(flag, "--api-url"), source: "--api-url" };
    const env = this.io.env.GPUCLOUD_API_URL;
    if (env) return { value: checkApiUrl(env, "GPUCLOUD_API_URL"), source: "GPUCLOUD_API_URL" };
    const config = await this.store.readConfig();
    if (config.apiUrl)
      return { value: checkApiUrl(config.apiUrl, this.store.configFile), source: this.store.configFile };
    return undefined;
  }

  async requireApiUrl(): Promise<Sourced<string>> {
    const url = await this.apiUrl();
    if (url === undefined) throw new UsageError("no API URL: pass --api-url or set GPUCLOUD_API_URL");
    return url;
  }

  /** The API key from the flag or the environment, else the stored sign-in; undefined when none. */
  async credential(): Promise<CredentialSource | undefined> {
    const flag = this.#input.string("api-key");
    if (flag !== undefined) {
      if (flag.trim() === "") throw new UsageError("--api-key is empty");
      return { kind: "api-key", apiKey: flag, source: "--api-key" };
    }
    const env = this.io.env.GPUCLOUD_API_KEY;
    if (env) return { kind: "api-key", apiKey: env, source: "GPUCLOUD_API_KEY" };
    const session = await this.store.readSession();
    if (session !== undefined) return { kind: "session", session, source: this.store.sessionFile };
    return undefined;
  }

  /** The cloud client for the resolved URL and credential (built once). */
  async client(): Promise<CloudClient> {
    if (this.#client !== undefined) return this.#client;
    const credential = await this.credential();
    if (credential === undefined) throw new AuthError(`not signed in: ${SIGN_IN_HINT}`);
    const url = await this.requireApiUrl();
    let credentials: Credentials;
    if (credential.kind === "api-key") credentials = { apiKey: credential.apiKey };
    else {
      const { session } = credential;
      if (session.apiUrl !== url.value) {
        throw new AuthError(
          `signed in to ${session.apiUrl}, not ${url.value} (${url.source}): run 'gpuvmctl login --api-url ${url.value}'`,
        );
      }
      credentials = { email: session.email, session: fileSession(this.store, session, this.io.now) };
    }
    this.#client = this.makeClient(url.value, credentials);
    return this.#client;
  }

  /** A client for an explicit credential (login signs in with the password before a session exists). */
  makeClient(baseUrl: string, credentials: Credentials): CloudClient {
    const logger = this.debug ? pino({ level: "debug", base: undefined }, this.io.stderr) : pino({ level: "silent" });
    return createCloudClient({ baseUrl, credentials, logger, timeoutMs: 30_000 });
  }

  /** The project: flag, GPUCLOUD_PROJECT_ID, `projects use`, else the credential's only project. */
  async project(): Promise<Sourced<string>> {
    if (this.#project !== undefined) return this.#project;
    this.#project = (await this.configuredProject()) ?? (await this.#onlyProject());
    return this.#project;
  }

  async projectId(): Promise<string> {
    return (await this.project()).value;
  }

  /** The project named by a flag, the environment or the config file, without asking the API. */
  async configuredProject(): Promise<Sourced<string> | undefined> {
    const flag = this.#input.string("project");
    if (flag !== undefined) {
      if (flag.trim() === "") throw new UsageError("--project is empty");
      return { value: flag, source: "--project" };
    }
    const env = this.io.env.GPUCLOUD_PROJECT_ID;
    if (env) return { value: env, source: "GPUCLOUD_PROJECT_ID" };
    const config = await this.store.readConfig();
    if (config.projectId) return { value: config.projectId, source: this.store.configFile };
    return undefined;
  }

  async #onlyProject(): Promise<Sourced<string>> {
    const projects = await (await this.client()).projects.list();
    const [only] = projects;
    if (projects.length === 1 && only !== undefined) return { value: only.id, source: "the only project you can see" };
    if (projects.length === 0) throw new AuthError("this credential sees no project: check it with 'gpuvmctl whoami'");
    throw new UsageError(
      `you can see ${projects.length} projects: choose one with 'gpuvmctl projects use <id>' or --project (list: 'gpuvmctl projects')`,
    );
  }
}
