// promtool comes from Debian's `prometheus` package (`apt-get install prometheus`); .ci/run installs it when
// missing. Without it the monitoring tests fail with that instruction: nothing the issue asks for is skipped.
import { execFile } from "node:child_process";
import { promisify } from "node:util";

export async function requirePromtool(): Promise<string> {
  const promtool = process.env.PROMTOOL ?? "promtool";
  try {
    await promisify(execFile)(promtool, ["--version"]);
  } catch (error) {
    throw new Error(
      `promtool is needed to check the alerting rules and /metrics: apt-get install -y prometheus (Debian), or set PROMTOOL`,
      { cause: error },
    );
  }
  return promtool;
}
