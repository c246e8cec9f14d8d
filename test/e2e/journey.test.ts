// The newcomer's journey on the Kubernetes API test double (the same journey runs on a real control plane in
// test/kubernetes/journey.test.ts).
import { describeJourney } from "./journey.ts";

describeJourney({ kube: "double" });
