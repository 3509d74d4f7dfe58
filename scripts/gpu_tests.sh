#!/usr/bin/env bash
# The GPU half of the test suite, in parallel processes sharing one GPU (compiling the kernels is what takes the
# time, and it is CPU-bound).  Usage: bash scripts/gpu_tests.sh OUT_DIR JOBS [pytest paths...]
# Each process runs every JOBS-th collected test and writes OUT_DIR/part.*.log; the summary lines are printed.
set -uo pipefail
out=$1
jobs=$2
shift 2
paths=("$@")
[ ${#paths[@]} -gt 0 ] || paths=(tests)
mkdir -p "$out"
python3 -m pytest -q --co -p no:cacheprovider "${paths[@]}" | grep '::' >"$out/nodes.txt"
echo "$(wc -l <"$out/nodes.txt") tests in $jobs processes"
split -n "r/$jobs" "$out/nodes.txt" "$out/part."
for part in "$out"/part.??; do
    timeout "${GPU_TEST_TIMEOUT:-480}" xargs -a "$part" -d '\n' python3 -m pytest -q -p no:cacheprovider \
        >"$part.log" 2>&1 &
done
wait
status=0
for log in "$out"/part.??.log; do
    line=$(tail -n 1 "$log")
    echo "$(basename "$log"): $line"
    case $line in *failed* | *error* | "") status=1 ;; esac
    grep -E '^(FAILED|ERROR)' "$log" || true
done
exit $status
