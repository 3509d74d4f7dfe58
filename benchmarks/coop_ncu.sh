#!/usr/bin/env bash
# Shared-memory traffic and tensor-pipe activity of the ping-pong kernel's `bare` mode, the cooperative probe and
# cuBLAS, one launch each under Nsight Compute (benchmarks/NOTES.md, session 13).  Usage on the H200:
#   bash benchmarks/coop_ncu.sh OUT_DIR [B ...]
set -uo pipefail
out=$1
shift
batches=("$@")
[ ${#batches[@]} -gt 0 ] || batches=(256 128)
mkdir -p "$out"
export PYTHONPATH=$PWD
ncu --query-metrics >"$out/ncu_metrics.txt" 2>&1
metrics=gpu__time_duration.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
metrics=$metrics,sm__cycles_elapsed.avg.per_second,dram__bytes_read.sum.per_second
base=$metrics
# Shared memory, where ncu has the metrics: the data banks' reads and writes (wgmma operands, TMA fills,
# ld/st.shared) as counts and percentages of peak; the L1 and SM memory throughputs as percentages only.
names() { grep -oE "^($1)\b" "$out/ncu_metrics.txt" | sort -u; }
for m in $(names 'l1tex__data_bank_(reads|writes)|l1tex__data_pipe_lsu_wavefronts_mem_shared'); do
    metrics=$metrics,$m.sum,$m.avg.pct_of_peak_sustained_elapsed
done
for m in $(names 'l1tex__throughput|sm__memory_throughput'); do
    metrics=$metrics,$m.avg.pct_of_peak_sustained_elapsed
done
echo "$metrics" >"$out/ncu_metric_list.txt"
profile() {  # name kernel-regex probe-args...
    local name=$1 kernel=$2
    shift 2
    timeout 300 ncu --clock-control none --kernel-name "regex:$kernel" --launch-skip 2 --launch-count 1 \
        --metrics "$metrics" python3 benchmarks/ncu_probe.py "$@" >"$out/ncu_smem_$name.txt" 2>&1
    if ! grep -q gpu__time_duration "$out/ncu_smem_$name.txt"; then  # a metric ncu refused: the base set
        timeout 300 ncu --clock-control none --kernel-name "regex:$kernel" --launch-skip 2 --launch-count 1 \
            --metrics "$base" --section MemoryWorkloadAnalysis_Tables python3 benchmarks/ncu_probe.py "$@" \
            >>"$out/ncu_smem_$name.txt" 2>&1
    fi
    echo "$name: $(grep -E 'gpu__time_duration|hmma_cycles|data_bank_(reads|writes).avg' "$out/ncu_smem_$name.txt" | awk '{print $1"="$NF}' | tr '\n' ' ')"
}
for B in "${batches[@]}"; do
    profile "pp_bare_64x256_b$B" probe_pipeline_kernel --B "$B" --ws-tiles 64,256,64,4,32,2 --mode bare --noise off
    profile "coop_bare_128x256_b$B" cooperative_probe --B "$B" --coop-stages 4 --mode bare
    profile "cublas_b$B" 'gemm|xmma|cutlass|sm90' --B "$B" --cublas
done
profile pp_bare_128x128_b256 pingpong_kernel --B 256 --ws-tiles 128,128,64,4,16,2 --mode bare --noise off
profile pp_exact_64x256_b256 pingpong_kernel --B 256 --ws-tiles 64,256,64,4,32,2 --noise exact
