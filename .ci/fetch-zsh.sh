#!/usr/bin/env bash
# A zsh for the completion test (test/cli/gpuvmctl/cli.test.ts), when the machine has none: Debian's statically
# linked zsh-static, unpacked (no root needed) into a git-ignored cache keyed by its version.
set -euo pipefail
cd "$(dirname "$0")/.."
if command -v zsh >/dev/null 2>&1; then exit 0; fi
version=5.9
target=.ci/cache/zsh-static-$version
if [ -x "$target/bin/zsh-static" ]; then exit 0; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get download zsh-static >/dev/null 2>&1)
dpkg -x "$work"/zsh-static_*.deb "$work/x"
mkdir -p "$target/bin"
cp "$work/x/bin/zsh-static" "$target/bin/zsh-static"
"$target/bin/zsh-static" -fc 'echo "zsh $ZSH_VERSION ready in '"$target"'"'
