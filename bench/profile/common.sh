# Shared by the profiling scripts of bench/profile (sourced, not run).

# fresh_workspace BIN URL [CREDITS]: migrates the database at URL, makes a workspace and a
# read/write key with the admin CLI, grants CREDITS if given; sets WS and KEY.
fresh_workspace() {
  local bin=$1 url=$2 credits=$3
  $bin migrate --database-url $url >/dev/null
  WS=$($bin admin --json --database-url $url workspace create --name Bench --owner-email bench@example.com | python3 -c 'import json,sys;print(json.load(sys.stdin)["workspace_id"])')
  KEY=$($bin admin --json --database-url $url key create --workspace $WS --email bench@example.com --name bench --scopes read,write | python3 -c 'import json,sys;print(json.load(sys.stdin)["key"])')
  if [ -n "$credits" ]; then
    $bin admin --database-url $url credits grant --workspace $WS --amount $credits >/dev/null
  fi
}

# server_port LOG: waits up to 120 s for the server's banner in LOG (its stdout) and prints the
# REST port.
server_port() {
  for i in $(seq 1 240); do grep -q "REST: http://" $1 2>/dev/null && break; sleep 0.5; done
  grep -o "REST: http://127.0.0.1:[0-9]*" $1 | sed 's/.*://'
}
