#!/bin/bash
# Where the memory of a large import goes: heaptrack over a server built with the system
# allocator (jemalloc's own calls are invisible to it). See bench/README.md, "Where a request's
# memory goes".
#
#   cargo build --release --no-default-features --target-dir target/sysalloc
#   bench/profile/heaptrack.sh target/sysalloc/release/outreach ROWS OUT
#
# ROWS: CSV rows imported in one request (shaped as the issue3 phase's rows); OUT: heaptrack's output prefix. `heaptrack_print -f OUT.*.zst` prints the peak and who
# allocated it; the server's RSS at its peak is printed at the end (VmHWM).
set -e
source "$(dirname "$0")/common.sh"
BIN=$1; ROWS=$2; OUT=$3
D=$(mktemp -d)
URL="sqlite://$D/o.db"
fresh_workspace $BIN $URL $((ROWS * 3))
trap 'kill $HPID 2>/dev/null; pkill -f "$D/o.db"; rm -rf $D' EXIT
heaptrack -o $OUT $BIN serve --addr 127.0.0.1:0 --database-url $URL --no-worker > $D/out.log 2> $D/err.log &
HPID=$!
PORT=$(server_port $D/out.log)
SERVER=$(pgrep -P $HPID -f "serve --addr" || pgrep -f "$D/o.db" | head -1)
python3 "$(dirname "$0")/drive.py" $PORT $KEY import $ROWS
grep VmHWM /proc/$SERVER/status || true
kill -INT $SERVER; wait $HPID 2>/dev/null || true
ls $OUT*
