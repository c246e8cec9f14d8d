// The foreground commands that serve (simulator, kube-double) run until SIGINT or SIGTERM, then close.

/** Wait for the first SIGINT or SIGTERM (no longer listening for either afterwards), then `close()` the server. */
export async function serveUntilSignal(server: { close(): Promise<void> }): Promise<void> {
  await new Promise<void>((resolve) => {
    const stop = (): void => {
      process.off("SIGINT", stop);
      process.off("SIGTERM", stop);
      resolve();
    };
    process.on("SIGINT", stop);
    process.on("SIGTERM", stop);
  });
  await server.close();
}
