#!/usr/bin/env bash
# Docs lint: what README.md and docs/*.md name must exist in the tree.
#
#   paths    every repository path in a code span or a link target: a token starting with lib/,
#            cmd/, hack/, test/, deployments/, bench/, docs/ or proto/ (globs are expanded; a
#            trailing :LINE or #anchor is ignored; a token with a placeholder such as <uid>, {a,b},
#            $VAR or ... is skipped), and every relative link target (resolved from the file's
#            folder);
#   symbols  every code span that is a C++ name: `Foo::Bar`, `ns::Foo::Bar()`, `SomeFunction()`
#            (arguments allowed): each part must be a word in a C++ or proto source under lib/,
#            cmd/, test/ or bench/. std::, absl::, grpc:: and other third-party namespaces are
#            skipped, as are names of the Go driver (a span with a '.' before the name).
#
# Fenced code blocks (```) are not read: they hold commands and output, not references.
#
# Usage: hack/docs-lint.sh [FILE.md ...]   (default: README.md docs/*.md)
# Prints "FILE:LINE: NAME not found" for each miss and "docs-lint: N names checked, M not found";
# exits non-zero when anything is not found.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
if (($#)); then files=("$@"); else files=(README.md docs/*.md); fi

words=$(mktemp)
trap 'rm -f "$words"' EXIT
# Every identifier of our C++ and proto sources, one a line.
git ls-files -co --exclude-standard -- 'lib/*' 'cmd/*' 'test/*' 'bench/*' 'proto/*' |
  grep -E '\.(h|cc|proto)$' | xargs -r cat -- 2>/dev/null |
  grep -oE '[A-Za-z_~][A-Za-z0-9_]*' | sort -u >"$words"

# Candidate names, one "KIND<TAB>FILE<TAB>LINE<TAB>NAME" a line (KIND: path, link, symbol).
candidates() {
  awk '
    FNR == 1 { fence = 0 }
    /^[ \t]*```/ { fence = !fence; next }
    fence { next }
    {
      line = $0
      # Link targets: ](target) and ](target "title").
      rest = line
      while (match(rest, /\]\([^) \t]+/)) {
        target = substr(rest, RSTART + 2, RLENGTH - 2)
        rest = substr(rest, RSTART + RLENGTH)
        printf "link\t%s\t%d\t%s\n", FILENAME, FNR, target
      }
      # Code spans.
      rest = line
      while (match(rest, /`[^`]+`/)) {
        span = substr(rest, RSTART + 1, RLENGTH - 2)
        rest = substr(rest, RSTART + RLENGTH)
        if (span ~ /^(~?[A-Za-z_][A-Za-z0-9_]*::)+~?[A-Za-z_][A-Za-z0-9_]*(\(.*\))?$/ ||
            span ~ /^[A-Za-z_][A-Za-z0-9_]*\(.*\)$/) {
          printf "symbol\t%s\t%d\t%s\n", FILENAME, FNR, span
        }
        n = split(span, tokens, /[ \t,;=()\[\]"'\'']+/)
        for (i = 1; i <= n; i++) {
          if (tokens[i] ~ /^(\.\/)?(lib|cmd|hack|test|deployments|bench|docs|proto)\//) {
            printf "path\t%s\t%d\t%s\n", FILENAME, FNR, tokens[i]
          }
        }
      }
    }' "$@"
}

# path_exists PATH: true when PATH (a glob allowed) names something in the checkout.
path_exists() {
  local p=$1
  if [[ $p == *[\*\?\[]* ]]; then
    compgen -G "$p" >/dev/null
  else
    [[ -e $p ]]
  fi
}

checked=0 missing=0
miss() {
  printf '%s:%s: %s not found\n' "$1" "$2" "$3"
  missing=$((missing + 1))
}

while IFS=$'\t' read -r kind file line name; do
  case $kind in
    path | link)
      p=$name
      if [[ $kind == link ]]; then
        case $p in http:* | https:* | mailto:* | \#*) continue ;; esac
        p=${p%%#*}
        [[ -n $p ]] || continue
        # Relative to the file's folder, unless it names a repository path from the root.
        if [[ ! $p =~ ^(lib|cmd|hack|test|deployments|bench|docs|proto)/ ]]; then
          p=$(dirname "$file")/$p
        fi
      fi
      p=${p#./}
      p=${p%%#*}
      p=$(sed -E 's/[.,:;]+$//; s/:[0-9]+(-[0-9]+)?$//' <<<"$p")
      case $p in *'<'* | *'{'* | *'$'* | *'...'* | *'…'*) continue ;; esac
      checked=$((checked + 1))
      path_exists "$p" || miss "$file" "$line" "$name"
      ;;
    symbol)
      sym=${name%%(*}
      case $sym in std::* | absl::* | grpc::* | nlohmann::* | testing::* | google::* | ::*) continue ;; esac
      checked=$((checked + 1))
      ok=1
      IFS=: read -ra parts <<<"${sym//::/:}"
      for part in "${parts[@]}"; do
        [[ -z $part ]] && continue
        grep -qxF -- "$part" "$words" || ok=0
      done
      ((ok)) || miss "$file" "$line" "$sym"
      ;;
  esac
done < <(candidates "${files[@]}")

echo "docs-lint: $checked names checked, $missing not found"
((missing == 0))
