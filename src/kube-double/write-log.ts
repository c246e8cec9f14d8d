// Every write the double received (any method but GET), in order: when it arrived, who sent it (the User-Agent:
// the operator names its replica there), the path, and the answer's status. Tests and the chaos run read it
// (`RunningKubeDouble.writes()`) to tell which replica wrote when, e.g. that none wrote after it lost its Lease
// (a Lease write of another replica in between). Bounded: the oldest entries go first.
import { BoundedLog } from "../util/bounded-log.ts";

export interface KubeWrite {
  /** Milliseconds since the epoch when the request arrived. */
  at: number;
  method: string;
  path: string;
  userAgent: string;
  /** The answer's status, once answered. */
  status?: number;
}

/** The double's write log: the newest 200,000 writes. */
export const newKubeWriteLog = (): BoundedLog<KubeWrite> => new BoundedLog<KubeWrite>(200_000);
