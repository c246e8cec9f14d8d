// Issue #32's acceptance on the playground over a real kube-apiserver (`--kube real`, the operator under deploy/'s
// RBAC): the ledger's conflicts and their retries are the API server's own here (the journeys: test/e2e/budgets.ts).
import { describeBudgetJourneys } from "../e2e/budgets.ts";
import { kubeBin } from "./shared.ts";

describeBudgetJourneys({ kube: "real", kubectl: kubeBin("kubectl") });
