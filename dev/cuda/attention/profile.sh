#!/usr/bin/env bash
# ncu profile of the tensor-core attention on the lent GPU (from the gpu-bundle, unpacked by
# scripts/gpu-run into /tmp/vosti-gpu): prefill 8 x 1024 and decode 64 x 2048 at split 512, one
# launch each, with the sections that say where a tile's time goes; plus
# the SASS of the hd 128 kernels. Writes $OUT/attn_ncu.csv, $OUT/attn_sass.txt, prints a summary.
set -uo pipefail
mkdir -p "$OUT"
B=/tmp/vosti-gpu
if [[ ! -x $B/bin/attention_cuda_bench ]]; then
  mkdir -p $B && tar -C $B -xJf .gpu-bundle/bundle.tar.xz
fi
export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-}
sections="--section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats
  --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis"
# Where warps wait: cycles stalled per issued instruction, by reason.
stalls=$(printf 'smsp__average_warps_issue_stalled_%s_per_issue_active.ratio,' barrier long_scoreboard \
  short_scoreboard math_pipe_throttle wait mio_throttle lg_throttle no_instruction dispatch_stall membar selected \
  not_selected branch_resolving tex_throttle sleeping drain imc_miss misc)
# Which pipes the warps keep busy (tensor, MUFU, FMA, ALU, shared-memory wavefronts) and how many
# instructions they issue.
pipes="smsp__inst_executed_op_local_ld.sum,smsp__inst_executed_op_local_st.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active"
sections="$sections --metrics ${stalls%,},$pipes"
# One call of each profiled configuration (--case picks it) after its warm-up call: a prefill call
# launches the one-split and the folding kernel, a decode call the per-split one.
: >"$OUT/attn_ncu.csv"
# ATTN_CASES (";"-separated "launches:case") and ATTN_SOURCE_CASE override the cases.
IFS=';' read -r -a specs <<<"${ATTN_CASES:-2:prefill 8 x 1024 split 512;2:prefill 1 x 8192 split 512;1:decode 64 x 2048 split 512}"
for spec in "${specs[@]}"; do
  n=${spec%%:*} c=${spec#*:}
  timeout 200 ncu --clock-control none -k regex:"attention_(mma|wgmma|decode)" --launch-skip "$n" --launch-count "$n" $sections \
    --csv --page details "$B/bin/attention_cuda_bench" --case "$c" --reps 1 >>"$OUT/attn_ncu.csv" 2>>"$OUT/attn_ncu.err"
done
echo "ncu exit $?"
python3 - "$OUT/attn_ncu.csv" <<'PY'
import csv, sys
rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"'))]
keep = ("stalled", "local", "Duration", "Registers Per Thread", "Achieved Occupancy", "Theoretical Occupancy", "Block Limit",
        "Compute (SM) Throughput", "Memory Throughput", "DRAM Throughput", "Issue Slots Busy", "Executed Ipc Active",
        "Warp Cycles Per Issued Instruction", "Avg. Active Threads Per Warp", "Dynamic Shared Memory Per Block",
        "Grid Size", "L1/TEX Hit Rate", "L2 Hit Rate", "Mem Busy", "Max Bandwidth", "Stall", "pipe", "inst_executed",
        "bank_conflicts", "warps_active")
seen = set()
for r in rows:
    key = (r["ID"], r["Kernel Name"], r["Metric Name"])
    if key in seen: continue
    seen.add(key)
    if any(k in r["Metric Name"] for k in keep):
        print(r["ID"], r["Kernel Name"][:60], "|", r["Metric Name"], "=", r["Metric Value"], r["Metric Unit"])
PY
cuobjdump -sass "$B/bin/attention_cuda_bench" 2>/dev/null | awk '/Function : .*attention_mma_kernelILi128E13__nv_bfloat16Lb[01]ELi[12]E/{p=1} /Function : /{if(!/attention_mma_kernelILi128E13__nv_bfloat16Lb[01]ELi[12]E/)p=0} p' >"$OUT/attn_sass.txt"
echo "sass lines $(wc -l <"$OUT/attn_sass.txt")"
for op in HMMA LDSM LDGSTS MUFU.EX2 BAR.SYNC LDG LDL STL IMAD.HI I2F.RP; do echo "$op $(grep -c "$op" "$OUT/attn_sass.txt")"; done
# Per-instruction SASS of the folding kernel (prefill 1 x 8192: its launch after the one-split
# one) with its stall samples: where a tile's cycles go, line by line.
timeout 200 ncu --clock-control none -k regex:"attention_(wgmma|mma)_kernel" --launch-skip 3 --launch-count 1 \
  --section SourceCounters --section WarpStateStats -f -o /tmp/attn_src "$B/bin/attention_cuda_bench" \
  --case "${ATTN_SOURCE_CASE:-prefill 1 x 8192 split 512}" --reps 1 >/dev/null 2>>"$OUT/attn_ncu.err"
ncu -i /tmp/attn_src.ncu-rep --page source --csv --print-source sass >"$OUT/attn_source.csv" 2>>"$OUT/attn_ncu.err"
echo "source page lines $(wc -l <"$OUT/attn_source.csv")"
