#!/usr/bin/env bash
# protocol/ is pure: no gRPC, no hclog, no networking, no clock, no role package,
# no database driver or data source (those are in source/).
# The role packages (owner, proxy, csp, user) never import each other.
# sim/faultnet imports nothing of fedpca; sim (the cluster harness) never
# imports its clients sim/chaos and sim/procs.
set -euo pipefail
cd "$(dirname "$0")/.."
mod=$(go list -m)
fail=0
roles="owner proxy csp user"

# Transitive dependencies that protocol/ must never reach.
banned_deps="google.golang.org/grpc github.com/hashicorp/go-hclog github.com/jackc database/sql"
for r in $roles sim cmd source; do banned_deps="$banned_deps $mod/$r"; done
for pkg in $(go list ./protocol/...); do
  for dep in $(go list -deps "$pkg"); do
    for b in $banned_deps; do
      if [ "$dep" = "$b" ] || [[ "$dep" == "$b/"* ]]; then
        echo "import boundary: $pkg depends on $dep"; fail=1
      fi
    done
  done
  # Direct imports: no net, no os/exec.
  for imp in $(go list -f '{{join .Imports " "}}' "$pkg"); do
    case "$imp" in
      net|net/*|os/exec|log|math/rand|math/rand/v2)
        echo "import boundary: $pkg imports $imp"; fail=1;;
    esac
  done
done

# No clock in protocol/ (time as data is fine; reading the clock is not).
if grep -rn --include='*.go' -E 'time\.(Now|Since|Until|Sleep|After|Tick|NewTimer|NewTicker)\(' protocol/ | grep -v '_test.go'; then
  echo "import boundary: protocol/ reads the clock"; fail=1
fi

# Role packages never import each other.
for r in $roles; do
  [ -d "$r" ] || continue
  for pkg in $(go list "./$r/..."); do
    for imp in $(go list -f '{{join .Imports " "}}' "$pkg"); do
      for o in $roles; do
        [ "$o" = "$r" ] && continue
        if [ "$imp" = "$mod/$o" ] || [[ "$imp" == "$mod/$o/"* ]]; then
          echo "import boundary: role $r ($pkg) imports role $o ($imp)"; fail=1
        fi
      done
    done
  done
done
# The fault network knows nothing of fedpca.
for dep in $(go list -deps ./sim/faultnet); do
  if [[ "$dep" == "$mod/"* ]] && [ "$dep" != "$mod/sim/faultnet" ]; then
    echo "import boundary: sim/faultnet depends on $dep"; fail=1
  fi
done

# The cluster harness never depends on the chaos suite or the process
# launcher (they import it).
for dep in $(go list -deps ./sim); do
  case "$dep" in
    "$mod/sim/chaos"|"$mod/sim/chaos/"*|"$mod/sim/procs"|"$mod/sim/procs/"*)
      echo "import boundary: sim depends on $dep"; fail=1;;
  esac
done
for dep in $(go list -deps ./sim/chaos); do
  case "$dep" in
    "$mod/sim/procs"|"$mod/cmd/"*|"$mod/bench"*) echo "import boundary: sim/chaos depends on $dep"; fail=1;;
  esac
done
exit $fail
