#!/usr/bin/env bash
# Prints each control-plane component (and local node, if any) as up or down; exits 0 only when all
# are healthy.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

rc=0
for c in "${COMPONENTS[@]}"; do
  if pid=$(component_pid "$c"); then
    if component_healthy "$c"; then
      printf '%-24s up         pid %-8s %s\n' "$c" "$pid" "$(health_url "$c")"
    else
      printf '%-24s unhealthy  pid %-8s %s\n' "$c" "$pid" "$(health_url "$c")"
      rc=1
    fi
  else
    printf '%-24s down\n' "$c"
    rc=1
  fi
done
((rc == 0)) && echo "kubeconfig: $KUBECONFIG_PATH"
# Local nodes, when there are any (node.sh).
if compgen -G "$RUN_DIR/dra-node-*" >/dev/null; then "$HACK_CLUSTER_DIR/node.sh" status || rc=1; fi
exit "$rc"
