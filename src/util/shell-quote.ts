// Commands printed for people to paste into a POSIX shell.

/** The word as is when the shell reads it unchanged, else single-quoted (a quote inside as '\''). */
export function shellQuote(word: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}
