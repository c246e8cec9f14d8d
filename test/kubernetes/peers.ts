// Our objects as their users' tools see them: Argo CD's health Lua run by gopher-lua (Argo CD's interpreter, with
// its sandbox) and kstatus (sigs.k8s.io/cli-utils), both built from their Go modules by `npm run kube:build`.
import { spawn } from "node:child_process";
import path from "node:path";
import { REPO_ROOT } from "../../src/control-plane/binaries.ts";
import { kubeBin } from "./shared.ts";

export const HEALTH_LUA = path.join(REPO_ROOT, "deploy/argocd/health.lua");

export interface PeerAnswer {
  status?: string;
  message?: string;
  /** Set when the tool failed on the object (for Argo CD: the script raised a Lua error). */
  error?: string;
}

function runPeer(command: string, args: string[], objects: unknown[]): Promise<PeerAnswer[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString("utf8");
    });
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString("utf8");
    });
    child.once("error", reject);
    // "close", not "exit": at "exit" the child's stdout may still hold answers not yet read (a loaded machine showed
    // "0 answers for 8 objects" from a peer that had answered all 8 and exited 0).
    child.once("close", (code) => {
      if (code !== 0) {
        reject(new Error(`${path.basename(command)} exited with ${code}: ${stderr}`));
        return;
      }
      const answers = stdout
        .split("\n")
        .filter((line) => line.trim() !== "")
        .map((line) => JSON.parse(line) as PeerAnswer);
      if (answers.length !== objects.length) {
        reject(new Error(`${path.basename(command)}: ${answers.length} answers for ${objects.length} objects`));
        return;
      }
      resolve(answers);
    });
    child.stdin.end(objects.map((object) => `${JSON.stringify(object)}\n`).join(""));
  });
}

/** Argo CD's verdict for each object, with the given script (deploy/argocd/health.lua by default). */
export function argocdHealth(objects: unknown[], script = HEALTH_LUA): Promise<PeerAnswer[]> {
  return runPeer(kubeBin("argocd-health"), [script], objects);
}

/** kstatus's verdict (Current, InProgress, Failed, Terminating, …) for each object. */
export function kstatus(objects: unknown[]): Promise<PeerAnswer[]> {
  return runPeer(kubeBin("kstatus"), [], objects);
}
