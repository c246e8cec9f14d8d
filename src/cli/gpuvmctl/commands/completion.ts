// completion bash|zsh: scripts generated from the command tree (commands, flags, and the values of flags
// with a fixed set of choices).
import { type Command, type Flag, GLOBAL_FLAGS } from "../command.ts";

interface Node {
  /** `/vms/list`; the root is the empty string. */
  path: string;
  command: Command;
}

function nodesOf(command: Command, path = ""): Node[] {
  return [{ path, command }, ...(command.subcommands ?? []).flatMap((c) => nodesOf(c, `${path}/${c.name}`))];
}

function flagWords(command: Command): string[] {
  return [...(command.flags ?? []), ...GLOBAL_FLAGS].flatMap((f) => [
    `--${f.name}`,
    ...(f.short ? [`-${f.short}`] : []),
  ]);
}

/** `path:flag` patterns whose value has a fixed set of choices. */
function choiceCases(nodes: readonly Node[]): { pattern: string; words: string[] }[] {
  const cases: { pattern: string; words: string[] }[] = [];
  const add = (path: string, flag: Flag) => {
    if (flag.choices === undefined) return;
    const names = [`--${flag.name}`, ...(flag.short ? [`-${flag.short}`] : [])];
    cases.push({ pattern: names.map((n) => `${path}:${n}`).join("|"), words: [...flag.choices] });
  };
  for (const flag of GLOBAL_FLAGS) add("*", flag);
  for (const { path, command } of nodes) for (const flag of command.flags ?? []) add(path, flag);
  return cases;
}

/**
 * The shell lines both scripts share: find the command path among the words before the cursor (`first` is
 * the index of the first word after the program name), then complete the value of a flag with choices.
 */
function walkAndChoices(
  nodes: readonly Node[],
  wordsVar: string,
  first: number,
  cursor: string,
  choices: string,
): string {
  const paths = nodes.filter((n) => n.path !== "").map((n) => n.path);
  return `  for ((i = ${first}; i < ${cursor}; i++)); do
    w="\${${wordsVar}[i]}"
    [[ "$w" == -* ]] && continue
    case "\${cmdpath}/\${w}" in
      ${paths.join("|")}) cmdpath="\${cmdpath}/\${w}" ;;
    esac
  done
  case "\${cmdpath}:\${prev}" in
${choices}
  esac`;
}

const shellWord = (word: string) => `'${word.replaceAll("'", `'\\''`)}'`;

export function bashCompletion(root: Command): string {
  const nodes = nodesOf(root);
  const choices = choiceCases(nodes)
    .map((c) => `    ${c.pattern}) COMPREPLY=($(compgen -W "${c.words.join(" ")}" -- "$cur")); return ;;`)
    .join("\n");
  const words = nodes
    .map((n) => {
      const subcommands = (n.command.subcommands ?? []).map((c) => c.name);
      const all = [...subcommands, ...(n.command.argChoices ?? []), ...flagWords(n.command)];
      return `    "${n.path}") words="${all.join(" ")}" ;;`;
    })
    .join("\n");
  return `# bash completion for gpuvmctl: source <(gpuvmctl completion bash)
_gpuvmctl() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" prev="\${COMP_WORDS[COMP_CWORD-1]}" cmdpath="" words="" i w
${walkAndChoices(nodes, "COMP_WORDS", 1, "COMP_CWORD", choices)}
  case "$cmdpath" in
${words}
  esac
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -o default -F _gpuvmctl gpuvmctl
`;
}

export function zshCompletion(root: Command): string {
  const nodes = nodesOf(root);
  const choices = choiceCases(nodes)
    .map((c) => `    ${c.pattern}) compadd -- ${c.words.map(shellWord).join(" ")}; return ;;`)
    .join("\n");
  const cases = nodes
    .map((n) => {
      const subcommands = n.command.subcommands ?? [];
      const names = [...subcommands.map((c) => c.name), ...(n.command.argChoices ?? [])].map(shellWord).join(" ");
      const described = [
        ...subcommands.map((c) => `${c.name.padEnd(18)} -- ${c.summary}`),
        ...(n.command.argChoices ?? []),
      ]
        .map(shellWord)
        .join(" ");
      const flags = flagWords(n.command).map(shellWord).join(" ");
      const commandLine = names !== "" ? `descs=(${described}); compadd -l -d descs -- ${names}; ` : "";
      return `    "${n.path}") if [[ "$cur" == -* ]]; then compadd -- ${flags}; else ${commandLine}: ; fi ;;`;
    })
    .join("\n");
  return `#compdef gpuvmctl
# zsh completion for gpuvmctl: source <(gpuvmctl completion zsh), or save as _gpuvmctl in your $fpath
_gpuvmctl() {
  local cur="\${words[CURRENT]}" prev="\${words[CURRENT-1]}" cmdpath="" w i
  local -a descs
${walkAndChoices(nodes, "words", 2, "CURRENT", choices)}
  case "$cmdpath" in
${cases}
  esac
}
if (( $+functions[compdef] )); then compdef _gpuvmctl gpuvmctl; fi
`;
}

export function completionCommand(root: () => Command): Command {
  return {
    name: "completion",
    summary: "print the shell completion script for bash or zsh",
    args: "<bash|zsh>",
    minArgs: 1,
    argChoices: ["bash", "zsh"],
    details:
      "bash: source <(gpuvmctl completion bash)   (or save it in ~/.local/share/bash-completion/completions/gpuvmctl)\nzsh:  source <(gpuvmctl completion zsh)    (after compinit; or save it as _gpuvmctl in your $fpath)",
    async run(ctx, input) {
      const shell = input.arg(0);
      ctx.out.raw(shell === "bash" ? bashCompletion(root()) : zshCompletion(root()));
      return 0;
    },
  };
}
