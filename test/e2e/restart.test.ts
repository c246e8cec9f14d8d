// The playground's restart on the Kubernetes API test double (the same runs on a real control plane in
// test/kubernetes/playground.test.ts).
import { describeRestart } from "./restart.ts";

describeRestart({ kube: "double" });
