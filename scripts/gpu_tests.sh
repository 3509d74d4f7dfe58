#!/usr/bin/env bash
# The GPU half of the test suite on one GPU: parallel pytest processes sharing it (compiling the kernels is what
# takes the time, and it is CPU-bound), then the tests marked gpu_exclusive alone.
#
#   bash scripts/gpu_tests.sh OUT_DIR [JOBS] [pytest paths...]
#
# JOBS defaults to min(CPU cores, GPU memory / 10 GiB) (13 on an H200 with 16 cores).  Each process caps its
# allocations at 0.95/JOBS of the GPU's memory and returns its cached blocks after each test (tests/conftest.py), so
# the processes cannot starve each other; a test that needs more than a share is marked gpu_exclusive and runs in
# the second phase with the whole GPU.  Each process writes OUT_DIR/part.*.log; OUT_DIR/memory.tsv gets every
# test's peak allocation (bytes allocated, bytes reserved, test id).  Exit status 0 iff every part passed.
set -uo pipefail
out=$1
shift
if [[ $# -gt 0 && $1 =~ ^[0-9]+$ ]]; then
    jobs=$1
    shift
else
    gpu_gib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0 | awk '{print int($1 / 1024)}')
    cores=$(nproc)
    jobs=$((gpu_gib / 10 < cores ? gpu_gib / 10 : cores))
    [ "$jobs" -ge 1 ] || jobs=1
fi
paths=("$@")
[ ${#paths[@]} -gt 0 ] || paths=(tests)
mkdir -p "$out"
# Without an install (a GPU machine with the repository on PYTHONPATH) the pytest plugin is loaded by name.
plugin=()
python3 -c "import importlib.metadata as m, sys; sys.exit(any(e.name == 'flashsampling_verification'
    for e in m.entry_points(group='pytest11')))" && plugin=(-p verification.pytest_plugin)
export FLASHSAMPLING_GPU_MEMLOG="$out/memory.tsv"
# JAX (the audit) on the CPU and without preallocation: on the GPU it takes 75 % of its memory at import.
export JAX_PLATFORMS=cpu XLA_PYTHON_CLIENT_PREALLOCATE=false
: >"$FLASHSAMPLING_GPU_MEMLOG"
python3 -m pytest -q --co -p no:cacheprovider "${plugin[@]}" -m "not gpu_exclusive" "${paths[@]}" | grep '::' >"$out/nodes.txt"
python3 -m pytest -q --co -p no:cacheprovider "${plugin[@]}" -m gpu_exclusive "${paths[@]}" | grep '::' >"$out/exclusive.txt"
echo "$(wc -l <"$out/nodes.txt") tests in $jobs processes, then $(wc -l <"$out/exclusive.txt") gpu_exclusive alone"
split -n "r/$jobs" "$out/nodes.txt" "$out/part."
for part in "$out"/part.??; do
    FLASHSAMPLING_GPU_JOBS=$jobs timeout "${GPU_TEST_TIMEOUT:-480}" xargs -a "$part" -d '\n' \
        python3 -m pytest -q -p no:cacheprovider "${plugin[@]}" >"$part.log" 2>&1 &
done
wait
if [ -s "$out/exclusive.txt" ]; then
    FLASHSAMPLING_GPU_JOBS=1 timeout "${GPU_TEST_TIMEOUT:-480}" xargs -a "$out/exclusive.txt" -d '\n' \
        python3 -m pytest -q -p no:cacheprovider "${plugin[@]}" >"$out/part.zz.log" 2>&1
fi
status=0
for log in "$out"/part.??.log; do
    line=$(tail -n 1 "$log")
    echo "$(basename "$log"): $line"
    case $line in *failed* | *error* | "") status=1 ;; esac
    grep -E '^(FAILED|ERROR)' "$log" || true
done
echo "largest peaks (GiB allocated, reserved, test):"
sort -rn "$FLASHSAMPLING_GPU_MEMLOG" | head -n 8 | awk -F'\t' '{printf "  %6.2f %6.2f %s\n", $1 / 2^30, $2 / 2^30, $3}'
exit $status
