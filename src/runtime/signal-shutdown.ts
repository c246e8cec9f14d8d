// SIGTERM and SIGINT while the manager runs: the first stops it gracefully and then exits 0, a second one exits 1 at
// once. Once stopped, the handlers are removed, so a later signal gets Node's default behaviour again.
import type { Logger } from "pino";

export class SignalShutdown {
  readonly #stop: () => Promise<void>;
  readonly #exit: (code: number) => void;
  readonly #logger: Logger;
  #handler: ((signal: NodeJS.Signals) => void) | undefined;

  constructor(options: { stop: () => Promise<void>; exit: (code: number) => void; logger: Logger }) {
    this.#stop = options.stop;
    this.#exit = options.exit;
    this.#logger = options.logger;
  }

  install(): void {
    let signals = 0;
    this.#handler = (signal) => {
      signals++;
      if (signals > 1) {
        this.#logger.warn({ signal }, "second signal: exiting without waiting");
        this.#exit(1);
        return;
      }
      this.#logger.info({ signal }, "signal received, shutting down gracefully");
      void this.#stop().then(() => this.#exit(0));
    };
    process.on("SIGTERM", this.#handler);
    process.on("SIGINT", this.#handler);
  }

  remove(): void {
    if (this.#handler === undefined) return;
    process.off("SIGTERM", this.#handler);
    process.off("SIGINT", this.#handler);
    this.#handler = undefined;
  }
}
