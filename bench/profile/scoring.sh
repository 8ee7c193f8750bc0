#!/bin/bash
# Wall time and server CPU of one scoring run over N prospects, on a fresh SQLite database, with
# the rows' scores spread over every tier (unlike the issue3 phase's rows, which all score `d` or
# `disqualified`). See bench/README.md, "Profiling one request".
#
#   bench/profile/scoring.sh BIN N [RUNS]
#
# BIN: the server binary; N: rows imported (unmeasured; drive.py's `import` kind with SPREAD=1);
# RUNS (default 3): scoring runs over the same list, one after another, each printed on its own
# line as `scored N in S s (R prospects/s), server CPU C s`.
set -e
BIN=$1; N=$2; RUNS=${3:-3}
HERE="$(dirname "$0")"
source "$HERE/common.sh"
D=$(mktemp -d)
URL="sqlite://$D/o.db"
fresh_workspace $BIN $URL $((N * (RUNS + 1)))
$BIN serve --addr 127.0.0.1:0 --database-url $URL --rate-limit 100000000 --rate-limit-burst 100000000 --no-worker \
  > $D/out.log 2> $D/err.log &
PID=$!
PORT=$(server_port $D/out.log)
SPREAD=1 python3 "$HERE/drive.py" $PORT $KEY import $N >/dev/null
python3 "$HERE/drive.py" $PORT $KEY score 0 > $D/ids
TICKS=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' /proc/$PID/stat; }
for run in $(seq 1 $RUNS); do
  BEFORE=$(cpu); START=$(date +%s.%N)
  python3 "$HERE/drive.py" $PORT $KEY score 1 < $D/ids > $D/run.log
  END=$(date +%s.%N); AFTER=$(cpu)
  grep -q '^200 ' $D/run.log || { cat $D/run.log; exit 1; }
  python3 -c "n=$N; s=$END-$START; print(f'scored {n} in {s:.3f} s ({n/s:.0f} prospects/s), server CPU {($AFTER-$BEFORE)/$TICKS:.2f} s')"
done
kill $PID; wait $PID 2>/dev/null || true
rm -rf $D
