// Issue #32's acceptance on the playground over the Kubernetes API test double (the journeys: budgets.ts).
import { describeBudgetJourneys } from "./budgets.ts";

describeBudgetJourneys({ kube: "double" });
