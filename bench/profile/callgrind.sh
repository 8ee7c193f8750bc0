#!/bin/bash
# Instructions per request of the release server, counted by callgrind (repeatable under load,
# unlike wall-clock figures on a shared machine). See bench/README.md, "Profiling one request".
#
#   bench/profile/callgrind.sh BIN KIND N OUT
#
# BIN: the server binary (target/release/outreach); KIND: rest (GET /api/v1/workspace), mcp
# (tools/call service_get_workspace) or list (GET /api/v1/prospects?limit=200, over 1,000 prospects it imports first); N: requests
# measured, over one keep-alive connection, after 200 unmeasured ones; OUT: the callgrind file
# (the measured part is OUT.1). Instructions per request = the `summary:` line of OUT.1 / N.
# KIND score: N rows of the issue3 phase's shape imported into a list and a targeting made
# (unmeasured), then one scoring run over the list (measured: OUT.1 is that run's instructions);
# with SPREAD=1 the rows also carry a seniority, industry, size and location, which spread the
# scores over every tier (without, every prospect is `d` or `disqualified`).
# With PG_URL set (postgres://postgres@127.0.0.1:5432), the server runs on a fresh PostgreSQL
# database there, dropped at the end; callgrind counts only the server's own instructions.
set -e
source "$(dirname "$0")/common.sh"
BIN=$1; KIND=$2; N=$3; OUT=$4
D=$(mktemp -d)
URL="sqlite://$D/o.db"
if [ -n "$PG_URL" ]; then
  PG_DB="callgrind_$$"
  psql "$PG_URL/postgres" -qc "create database $PG_DB" >/dev/null
  URL="$PG_URL/$PG_DB"
fi
if [ "$KIND" = score ]; then fresh_workspace $BIN $URL $((N * 3)); else fresh_workspace $BIN $URL; fi
valgrind --tool=callgrind --callgrind-out-file=$OUT --dump-instr=no \
  $BIN serve --addr 127.0.0.1:0 --database-url $URL --rate-limit 100000000 --rate-limit-burst 100000000 --no-worker \
  > $D/out.log 2> $D/err.log &
VPID=$!
PORT=$(server_port $D/out.log)
if [ "$KIND" = score ]; then
  # N rows imported (unmeasured), then one scoring run over them (measured).
  python3 "$(dirname "$0")/drive.py" $PORT $KEY import $N >/dev/null
  python3 "$(dirname "$0")/drive.py" $PORT $KEY score 0 > $D/ids
  callgrind_control -z $VPID >/dev/null
  python3 "$(dirname "$0")/drive.py" $PORT $KEY score 1 < $D/ids
else
  if [ "$KIND" = list ]; then python3 "$(dirname "$0")/drive.py" $PORT $KEY seed 1000 >/dev/null; fi
  python3 "$(dirname "$0")/drive.py" $PORT $KEY $KIND 200 >/dev/null
  callgrind_control -z $VPID >/dev/null
  python3 "$(dirname "$0")/drive.py" $PORT $KEY $KIND $N
fi
callgrind_control -d $VPID >/dev/null
sleep 1
kill $VPID; wait $VPID 2>/dev/null || true
ls $OUT* ; echo "log lines: $(wc -l < $D/err.log)"
rm -rf $D
if [ -n "$PG_URL" ]; then psql "$PG_URL/postgres" -qc "drop database $PG_DB" >/dev/null; fi
