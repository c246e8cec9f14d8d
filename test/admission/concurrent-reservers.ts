// Several processes reserving in one GpuBudget at once, against an API server (the test double here, the real
// kube-apiserver in test/kubernetes/budgets.test.ts): the shared body of both tests. Some processes are SIGKILLed
// while they reserve, as replicas die between a reservation and their cloud call.
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { budgetOf } from "../../src/admission/budget-records.ts";
import { type Budget, totalsOf } from "../../src/admission/ledger.ts";
import { toMicros } from "../../src/admission/money.ts";

const CHILD = fileURLToPath(new URL("./fixtures/reserver-child.ts", import.meta.url));

export interface ReserverRun {
  /** Answers the processes reported before they ended (or were killed), by object name. */
  answers: Map<string, string>;
  /** The budget once every process has ended. */
  budget: Budget;
  killed: number;
}

interface Reserver {
  /** Resolves at the process' first answer (or its end). */
  started: Promise<void>;
  /** Resolves with its answers when it has ended (killed or not). */
  ended: Promise<{ answers: Map<string, string>; killed: boolean }>;
}

/** One reserving process, SIGKILLed right after its `killAfterAdmitted`-th admission when that is given. */
function reserver(
  kubeconfig: string,
  namespace: string,
  prefix: string,
  count: number,
  killAfterAdmitted?: number,
): Reserver {
  const child = spawn(process.execPath, [CHILD, kubeconfig, namespace, prefix, String(count)], {
    stdio: ["pipe", "pipe", "pipe"],
  });
  const answers = new Map<string, string>();
  let stderr = "";
  let buffered = "";
  let markStarted = () => {};
  const started = new Promise<void>((resolve) => {
    markStarted = resolve;
  });
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    buffered += chunk;
    const lines = buffered.split("\n");
    buffered = lines.pop() ?? "";
    for (const line of lines.filter(Boolean)) {
      markStarted();
      const answer = JSON.parse(line) as { name?: string; type?: string; done?: boolean };
      if (answer.done === true) child.stdin.end();
      if (answer.name === undefined || answer.type === undefined) continue;
      answers.set(answer.name, answer.type);
      const admitted = [...answers.values()].filter((type) => type === "admitted").length;
      // Dies with its other reservations in flight, before any cloud call for the ones it got.
      if (admitted === killAfterAdmitted) child.kill("SIGKILL");
    }
  });
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
    stderr += chunk;
  });
  const ended = new Promise<{ answers: Map<string, string>; killed: boolean }>((resolve, reject) => {
    child.on("exit", (code, signal) => {
      markStarted();
      if (signal === "SIGKILL") resolve({ answers, killed: true });
      else if (code === 0) resolve({ answers, killed: false });
      else reject(new Error(`reserver ${prefix} exited ${code}: ${stderr}`));
    });
  });
  return { started, ended };
}

/**
 * `processes` reservers of `perProcess` a40.1x objects each into the namespace's budgets (a $22 one has room for
 * twenty); a process listed in `killAfterAdmitted` is SIGKILLed as soon as it reports that many admissions (its
 * objects are `p<index>-<n>`). Process 0 starts first and the others join at its first answer, so that it is sure to
 * hold something when it is killed while the others race it.
 */
export async function runReservers(options: {
  kubeconfig: string;
  namespace: string;
  processes: number;
  perProcess: number;
  killAfterAdmitted?: Record<number, number>;
  readBudget(): Promise<unknown>;
}): Promise<ReserverRun> {
  const start = (index: number) =>
    reserver(
      options.kubeconfig,
      options.namespace,
      `p${index}`,
      options.perProcess,
      options.killAfterAdmitted?.[index],
    );
  const first = start(0);
  await first.started;
  const others = Array.from({ length: options.processes - 1 }, (_, index) => start(index + 1));
  const runs = await Promise.all([first, ...others].map((run) => run.ended));
  const answers = new Map(runs.flatMap((run) => [...run.answers]));
  const budget = budgetOf(await options.readBudget());
  if (budget === undefined) throw new Error("the budget did not parse");
  return { answers, budget, killed: runs.filter((run) => run.killed).length };
}

/** What must hold after any run: the limit is kept, and every admission a process reported has its entry. */
export function ledgerViolations(run: ReserverRun, limitDollars: number): string[] {
  const found: string[] = [];
  const totals = totalsOf(run.budget.entries);
  if (totals.usedMicros + totals.reservedMicros > toMicros(limitDollars))
    found.push(`holds ${totals.reservedMicros / 1e6} $/h, more than the limit ${limitDollars}`);
  for (const [name, type] of run.answers) {
    if (type === "admitted" && run.budget.entries[`uid-${name}`] === undefined)
      found.push(`${name} admitted without an entry`);
    if (type === "waiting" && run.budget.waiting[`uid-${name}`] === undefined) found.push(`${name} waits unrecorded`);
  }
  return found;
}
