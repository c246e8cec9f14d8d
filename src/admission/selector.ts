// Kubernetes label selector semantics (metav1.LabelSelector) for the objects a GpuBudget covers: every matchLabels
// pair and every matchExpressions requirement must hold; an empty or absent selector selects everything.
import type { LabelSelector } from "../api/gpu-budget.ts";

export function selects(selector: LabelSelector | undefined, labels: Readonly<Record<string, string>> = {}): boolean {
  if (selector === undefined) return true;
  for (const [key, value] of Object.entries(selector.matchLabels ?? {})) {
    if (labels[key] !== value) return false;
  }
  for (const { key, operator, values = [] } of selector.matchExpressions ?? []) {
    const present = Object.hasOwn(labels, key);
    const value = labels[key];
    switch (operator) {
      case "In":
        if (!present || !values.includes(value ?? "")) return false;
        break;
      case "NotIn":
        if (present && values.includes(value ?? "")) return false;
        break;
      case "Exists":
        if (!present) return false;
        break;
      case "DoesNotExist":
        if (present) return false;
        break;
    }
  }
  return true;
}
