#!/usr/bin/env bash
# run16.sh: the runs of docs/PERFORMANCE.md's "On a 16-core machine", as one
# script for a machine lent for a few minutes that has no Go toolchain.
#
#   bash bench/run16.sh build DIR   # here: static binaries into DIR
#   bash bench/run16.sh run DIR     # there, from the repository root
#
# run writes each step's output to $OUT (default /tmp/run16) as the step
# runs, with a time limit per step, so that a run cut short keeps what it
# measured; $OUT/log.txt has each step's exit status and seconds. Store
# files go under $RUN16_TMP (default .tmpd in the repository root: the
# machine's disk, not tmpfs), removed at the end; the 1e9 filters take
# 8.5 GB. SMALL=1 runs every step at toy sizes (a dry run, a minute on a
# 2-vCPU machine). The eighteenth session's run took 239 s, the
# twenty-third's 217 s. $OUT gets eight files (log.txt, machine.txt and
# one a step): the device tool that lends the machine copies back no
# more than eight, so a new step must replace one or go into an archive.
set -u
mode=${1:-}
dir=${2:-}
if [ -z "$mode" ] || [ -z "$dir" ]; then
	echo "usage: bash bench/run16.sh build|run DIR" >&2
	exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
case $mode in
build)
	mkdir -p "$dir" && dir=$(cd "$dir" && pwd) || exit 1
	(cd "$root/bench" && CGO_ENABLED=0 go build -ldflags='-s -w' -o "$dir/compare" ./cmd/compare) &&
		(cd "$root" && CGO_ENABLED=0 go test -c -ldflags='-s -w' -o "$dir/store.test" ./store)
	exit
	;;
run) ;;
*)
	echo "run16.sh: unknown mode $mode (build or run)" >&2
	exit 2
	;;
esac
B=$(cd "$dir" && pwd) || exit 1
OUT=${OUT:-/tmp/run16}
mkdir -p "$OUT"
T=${RUN16_TMP:-$root/.tmpd}
mkdir -p "$T"
export TMPDIR=$T
if [ "${SMALL:-0}" = 1 ]; then
	N7=1e5 N8=200000 N9=300000 HM=20000x RL=2000
else
	N7=1e7 N8=100000000 N9=1000000000 HM=4000000x RL=60000
fi
step() {
	local name=$1 lim=$2 t0
	shift 2
	t0=$(date +%s)
	echo "=== $name (limit $lim s) $(date -u +%T)" >>"$OUT/log.txt"
	timeout "$lim" "$@" >"$OUT/$name.txt" 2>&1
	echo "=== $name rc=$? $(($(date +%s) - t0)) s" >>"$OUT/log.txt"
}
{
	lscpu
	free -g
	uname -a
	cat /sys/kernel/mm/transparent_hugepage/enabled
	echo "perf_event_paranoid $(cat /proc/sys/kernel/perf_event_paranoid)"
	df -h "$T"
} >"$OUT/machine.txt" 2>&1
# Single lookups in pairs and the round-robin table at 1e7, with hardware
# events where the kernel counts them (-counters).
step pairs-bloom-1e7 110 "$B/compare" -pairs -n $N7 -lookups 2e6 -seed 14 -counters -libs fs-bloom,fs-store-bloom,blobloom -tmp "$T"
step rr-1e7 120 "$B/compare" -n $N7 -rounds 3 -lookups 1e6 -seed 14 -cold=false -counters \
	-libs fs-bloom-owned,blobloom,fs-cuckoo-f16-owned,panmari,fs-store-bloom,fs-store-cuckoo -tmp "$T"
step pairs-cuckoo-1e7 110 "$B/compare" -pairs -n $N7 -lookups 2e6 -seed 14 -counters -libs fs-cuckoo-f16,fs-store-cuckoo,panmari -tmp "$T"
# HasMany at 1e9, every kind in one process; its setup's Loads of 1e9 keys
# on 16 CPUs are logged (-test.v).
mkdir -p "$T/many"
step hasmany-1e9 200 "$B/store.test" -test.run '^$' -test.bench '^BenchmarkHasMany$' -test.benchtime $HM -test.v \
	-many.n $N9 -many.kinds bloom,cuckoo,counting -many.dir "$T/many" -rss.limit $RL
# Load at 1e8 on 1 and 2 CPUs, alternated. The first -test.cpu entry runs on
# the GOMAXPROCS of the last (BenchmarkLoad's procs metric says so), hence
# 16 at both ends.
step load-1e8 150 "$B/store.test" -test.run '^$' -test.bench '^BenchmarkLoad(Cuckoo|Counting)?$' -test.benchtime 1x \
	-test.cpu 16,1,2,1,2,16 -load.n $N8 -load.log -rss.limit $RL
# Lookups from 1 to 16 goroutines on the 1e9 filters above.
step parallel-1e9 60 "$B/store.test" -test.run '^$' -test.bench '^BenchmarkHasManyParallel$' -test.benchtime 100ms \
	-test.cpu 1,2,4,8,16 -many.n $N9 -many.kinds bloom,cuckoo,counting -many.dir "$T/many" -rss.limit $RL
rm -rf "$T"
echo "=== done $(date -u +%T)" >>"$OUT/log.txt"
