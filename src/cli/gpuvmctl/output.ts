// Everything a command prints on stdout: aligned tables (headers optional, colour only where allowed),
// key/value details, or the raw data as JSON or YAML (`-o json|yaml`). Notes and progress go to stderr.
import { stringify } from "yaml";

/** YAML without folded lines: an SSH key or a URL stays on one line, as people copy them. */
export function toYaml(value: unknown): string {
  return stringify(value, { lineWidth: 0 });
}

import { colorAllowed, type Io } from "./io.ts";

export const OUTPUT_FORMATS = ["table", "json", "yaml"] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

export type Paint = "green" | "yellow" | "red" | "dim" | "bold" | "cyan";
const SGR: Record<Paint, string> = { green: "32", yellow: "33", red: "31", dim: "2", bold: "1", cyan: "36" };

export interface Column<T> {
  header: string;
  value(item: T): string;
  align?: "right";
  paint?(value: string, item: T): Paint | undefined;
}

export interface OutputOptions {
  format: OutputFormat;
  noHeaders: boolean;
  noColor: boolean;
}

export class Output {
  readonly format: OutputFormat;
  readonly #io: Io;
  readonly #noHeaders: boolean;
  readonly #color: boolean;
  readonly #stderrColor: boolean;

  constructor(io: Io, options: OutputOptions) {
    this.#io = io;
    this.format = options.format;
    this.#noHeaders = options.noHeaders;
    this.#color = colorAllowed(io, io.stdout, options.noColor);
    this.#stderrColor = colorAllowed(io, io.stderr, options.noColor);
  }

  get structured(): boolean {
    return this.format !== "table";
  }

  /** A list: a table of `columns`, or `raw` (default: the items themselves) as JSON/YAML. */
  list<T>(items: readonly T[], columns: readonly Column<NoInfer<T>>[], raw: unknown = items): void {
    if (this.structured) {
      this.data(raw);
      return;
    }
    this.table(items, columns);
  }

  table<T>(items: readonly T[], columns: readonly Column<NoInfer<T>>[], footer?: readonly string[]): void {
    const rows = items.map((item) => columns.map((column) => column.value(item)));
    // --no-headers is for scripts: no header line, and no totals line either.
    const totals = this.#noHeaders ? undefined : footer;
    const all = [...(this.#noHeaders ? [] : [columns.map((c) => c.header)]), ...rows, ...(totals ? [totals] : [])];
    const widths = columns.map((_, index) => Math.max(0, ...all.map((row) => visibleLength(row[index] ?? ""))));
    const lines: string[] = [];
    const render = (cells: readonly string[], paintOf: (index: number, value: string) => Paint | undefined) =>
      cells
        .map((cell, index) => {
          const width = widths[index] ?? 0;
          const last = index === cells.length - 1;
          const padding = " ".repeat(Math.max(0, width - visibleLength(cell)));
          const text = columns[index]?.align === "right" ? padding + cell : last ? cell : cell + padding;
          const paint = paintOf(index, cell);
          return paint === undefined ? text : this.paint(text, paint);
        })
        .join("   ")
        .trimEnd();
    if (!this.#noHeaders)
      lines.push(
        render(
          columns.map((c) => c.header),
          () => "bold",
        ),
      );
    items.forEach((item, row) => {
      lines.push(render(rows[row] ?? [], (index, value) => columns[index]?.paint?.(value, item)));
    });
    if (totals !== undefined) lines.push(render(totals, () => "bold"));
    this.#io.stdout.write(lines.length > 0 ? `${lines.join("\n")}\n` : "");
  }

  /** One object: aligned `Label:  value` lines, or `raw` as JSON/YAML. */
  details(pairs: readonly (readonly [string, string])[], raw: unknown): void {
    if (this.structured) {
      this.data(raw);
      return;
    }
    const width = Math.max(0, ...pairs.map(([label]) => label.length + 1));
    for (const [label, value] of pairs) this.#io.stdout.write(`${`${label}:`.padEnd(width)}  ${value}\n`);
  }

  /** Data in the chosen structured format; YAML for the table format (nothing tabular to show). */
  data(value: unknown): void {
    this.#io.stdout.write(this.format === "json" ? `${JSON.stringify(value, null, 2)}\n` : toYaml(value));
  }

  /** A line on stdout (table mode only: structured output stays parseable). */
  line(text: string): void {
    if (!this.structured) this.#io.stdout.write(`${text}\n`);
  }

  /** A line on stdout in every format (text that is the output itself: a manifest, a command). */
  raw(text: string): void {
    this.#io.stdout.write(text.endsWith("\n") ? text : `${text}\n`);
  }

  /** A hint or warning for the person, on stderr. */
  note(text: string): void {
    this.#io.stderr.write(`${this.#stderrColor ? this.#sgr(text, "dim") : text}\n`);
  }

  paint(text: string, paint: Paint): string {
    return this.#color ? this.#sgr(text, paint) : text;
  }

  /** Like paint, for text written to stderr (progress, notes). */
  paintErr(text: string, paint: Paint): string {
    return this.#stderrColor ? this.#sgr(text, paint) : text;
  }

  #sgr(text: string, paint: Paint): string {
    return `\u001b[${SGR[paint]}m${text}\u001b[0m`;
  }
}

function visibleLength(text: string): number {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: strips ANSI colour sequences
  return [...text.replace(/\u001b\[[0-9;]*m/g, "")].length;
}

/** Colour of a state word: settled-good green, in transition yellow, failed red. */
export function paintState(state: string): Paint | undefined {
  const upper = state.toUpperCase();
  if (/RUNNING|SUCCEEDED|ACTIVE|^YES$|VALID$/.test(upper) && !upper.includes("INVALID")) return "green";
  if (/FAILED|ERROR|^NO$|MISSING|INVALID/.test(upper)) return "red";
  if (upper === "" || upper === "-") return undefined;
  return "yellow";
}

/** Dollars with cents, or more digits below one cent. */
export function formatUsd(value: number): string {
  if (value !== 0 && Math.abs(value) < 0.01) return `$${value.toFixed(6)}`;
  return `$${value.toFixed(2)}`;
}

export function formatNumber(value: number, digits = 2): string {
  return value.toFixed(digits);
}

/** `-` for an empty value, so columns stay aligned and readable. */
export function orDash(value: string | undefined | null): string {
  return value === undefined || value === null || value === "" ? "-" : value;
}
