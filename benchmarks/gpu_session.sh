#!/usr/bin/env bash
# One GPU visit's worth of measurements, run on the device machine from the repository root:
#
#   bash benchmarks/gpu_session.sh PHASE [PHASE ...]      (carry: .whl and .kb; results land in $OUT)
#
# Phases (each bounded by `timeout` and by what is left of VISIT_S, so one stuck step cannot eat the visit):
#   tests      GPU-marked tests (issues 2, 3)                          -> gpu_tests.log
#   evaluator  evaluator wall time and speedup spread, 11 problems     -> evaluator_gpu.{json,md,log}
#   overhead   what the anti-cheat checks add to an evaluation         -> evaluator_overhead.json
#   seeds      the seed library evaluated on this GPU (issue 4)        -> manifest.json
#   profiler   the profiler on the remaining cases (issue 6)           -> profiler.tar.gz
#   suite      the built-in generator over levels 1-2 (issues 7, 8)    -> results.jsonl, report.*
#   probe      `tritonsmith optimize` attempt tables for $PROBE          -> probe/*/report.md
#   convlayout channels-last vs NCHW convolutions for $CONVS            -> conv_layout.txt, inductor_output_code.txt
#   coldprof   where a cold `tritonsmith profile` spends its time: 3 fresh processes -> coldprof/
#   mainjob    the README's main command on the GPU, then one cold `tritonsmith profile` -> mainjob/, mainjob.log
#   honest     every honest kernel we have through the evaluator (issue 17) -> evaluator_honest.{json,md}
#   shortk     speedup spread of short kernels over 3 evaluations (issue 17) -> short_kernels.{json,md}
#   generalize the unseen-shape check of runs' verified kernels ($GEN_RUN: run or results folders, space-separated,
#              default .runs/suite; GEN_JOBS kernels at once; GEN_ARGS=--resume goes on from what an earlier call
#              on the same machine finished) -> generalize/
#   convtriton the Triton convolutions vs cuDNN and torch.compile, dev level 1 (issue 19) -> conv_triton.{json,log}
#   convtiles  implicit-GEMM convolution tiles checked and timed against cuDNN ($TILES_ARGS: conv_tiles_gpu.py's
#              options, e.g. --layout nhwc --from-aot AOT.json --only 56 62) -> conv_tiles.{json,log}
#   rowk       row-reduction kernels of chosen launchers timed alone, with source variants ($ROWK) -> row_kernels.md
#   wtg        where the device time goes, eager vs torch.compile vs candidates, kernel by kind ($WTG: pairs
#              PROBLEM.py=CAND.py[,CAND.py]; see benchmarks/where_time_goes_gpu.py) -> where_time_goes.{md,json}
# Everything comes back as $OUT/all.tar.gz.
# Environment: EVAL_S, TESTS_S, SUITE_S, PROF_S (seconds per phase), EVAL_ONLY (problem stems),
# KB (the KernelBench folder, default .kb), KB_ONLY (problems of it to keep, as level/number prefixes such as
# "level1/96 level3/32": the suite then runs only those, from a folder made under /tmp),
# PROF_ONLY (profiler case names, default all six), SUITE_ARGS, VISIT_S (the call's own limit, default 570:
# every phase is cut to what is left of it, so the last pack always happens before the device stops the call).
set -u
END=$(( $(date +%s) + ${VISIT_S:-570} ))
# cap SECONDS: SECONDS, or what is left of the visit less 15 s for packing, whichever is smaller (at least 1)
cap() { local left=$(( END - $(date +%s) - 15 )); (( left < 1 )) && left=1; echo $(( $1 < left ? $1 : left )); }
tmo() { timeout "$(cap "$1")" "${@:2}"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=$PWD/src:/tmp/site PYTHONUNBUFFERED=1 || exit 1
# Phases write into RAW; after each phase RAW is packed into $OUT/all.tar.gz (the device returns at most
# 8 files, and a visit cut short by its time limit still returns what the finished phases wrote).
RESULTS=${OUT:-/tmp/out}
export OUT=/tmp/raw
mkdir -p "$OUT" "$RESULTS"
pack() { tar czf "$RESULTS/.all.tar.gz" -C "$OUT" . && mv "$RESULTS/.all.tar.gz" "$RESULTS/all.tar.gz"; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader;
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } > "$OUT/env.txt" 2>&1

if [ -n "${KB_ONLY:-}" ]; then
  # a KernelBench folder of the chosen problems only ("level3/32" -> level3/32_*.py; "32_" would not match 320)
  sel=/tmp/kb_only; rm -rf "$sel"
  for p in $KB_ONLY; do
    mkdir -p "$sel/${p%%/*}"
    cp "${KB:-.kb}/${p%%/*}/${p#*/}"_*.py "$sel/${p%%/*}/" || echo "KB_ONLY: no problem $p in ${KB:-.kb}"
  done
  KB=$sel; ls -R "$sel"
fi

for phase in "$@"; do
  echo "=== $phase $(date -u +%T)"
  case $phase in
    tests)
      # shellcheck disable=SC2086
      tmo "${TESTS_S:-240}" python3 -m pytest -v -rA --durations=0 --tb=short -m gpu -p no:cacheprovider \
        --timeout 100 ${TESTS:-tests/} > "$OUT/gpu_tests${TESTS_TAG:-}.log" 2>&1
      echo "pytest rc=$?" >> "$OUT/gpu_tests${TESTS_TAG:-}.log"
      grep -E "PASSED|FAILED|ERROR|SKIPPED|passed|failed|rc=" "$OUT/gpu_tests${TESTS_TAG:-}.log" | tail -30 ;;
    evaluator)
      # shellcheck disable=SC2086
      tmo "${EVAL_S:-330}" python3 benchmarks/evaluator_gpu.py .kb --repeats 3 --spawn-repeats 0 --no-census \
        ${EVAL_ONLY:+--only $EVAL_ONLY} 2>&1 | grep -v Warning | tail -60 ;;
    overhead)
      tmo 150 python3 benchmarks/evaluator_overhead.py --device cuda --reps ${OVERHEAD_REPS:-5} 2>&1 | tail -15 ;;
    seeds)
      tmo 200 python3 benchmarks/seed_library_gpu.py 2>&1 | tail -25 ;;
    profiler)
      mkdir -p /tmp/prof && OUT=/tmp/prof tmo "${PROF_S:-240}" python3 benchmarks/profiler_gpu.py .kb ${PROF_ONLY:+--only $PROF_ONLY} \
        2>&1 | tail -25; tar czf "$OUT/profiler.tar.gz" -C /tmp/prof . ;;
    suite)
      # the hard stop 20 s before the timeout: the stopped workers get 5 s to answer, then the report is written
      budget=$(( $(cap $(( ${SUITE_S:-420} + 115 ))) - 115 )); (( budget < 30 )) && { echo "suite: no time left"; pack; continue; }
      # shellcheck disable=SC2086
      tmo "$(( budget + 115 ))" python3 benchmarks/suite_gpu.py record --kernelbench ${KB:-.kb} --run-dir "$PWD/.runs/suite" \
        --time-budget "$budget" --hard-stop "$(( budget + 95 ))" ${SUITE_ARGS:-} 2>&1 | tail -40 ;;
    probe)
      # what the variants of a few problems measure, attempt by attempt (PROBE: problem paths, PROBE_ITERS)
      for f in ${PROBE:-}; do
        n=$(basename "$f" .py)
        # profiling off: with it each refined attempt also spends 20-40 s in the profiler
        TRITONSMITH_PROFILE=0 tmo 120 python3 -m tritonsmith optimize "$f" --generator builtin \
          --iterations "${PROBE_ITERS:-4}" --no-memory --out "$OUT/probe/$n" > "$OUT/probe_$n.log" 2>&1
        grep -E "^\| [0-9]" "$OUT/probe/$n/report.md" | cut -c1-260
        pack
      done ;;
    convlayout)
      # shellcheck disable=SC2086
      # TORCH_LOGS=output_code: torch.compile's generated code, to see how it lays out the convolution
      TORCH_LOGS=output_code tmo 200 python3 benchmarks/conv_layout_gpu.py ${CONVS:-} \
        2> "$OUT/inductor_output_code.txt" | tee "$OUT/conv_layout.txt" ;;
    mainjob)
      # the README's main command (pip steps aside: the wheels are already on PYTHONPATH), timed, as a user runs
      # it; then a cold CLI profile (a fresh process: zygote start, ceilings, ncu) of the same problem
      TIMEFORMAT="wall %R s"
      { time tmo 300 python3 -m tritonsmith optimize example:softmax_reference.py --out "$OUT/mainjob" 2>&1
        echo "optimize rc=$?"
        time tmo 120 python3 -m tritonsmith profile example:softmax_reference.py example:softmax_triton.py \
          --device cuda --compiled 2>&1
        echo "profile rc=$?"; } > "$OUT/mainjob.log" 2>&1
      grep -v Warning "$OUT/mainjob.log" | tail -40 ;;
    coldprof)
      # 1: first process on the machine (cold page cache); 2: fresh Triton and inductor caches; 3: warm caches
      mkdir -p "$OUT/coldprof"; TIMEFORMAT="%R"
      { time python3 -c "import torch" ; } 2> "$OUT/coldprof/import_torch_s.txt"
      ls /dev/nvidiactl /dev/nvidia0 > "$OUT/coldprof/device_nodes.txt" 2>&1; cat "$OUT/coldprof/device_nodes.txt"
      for i in 1 2 3; do
        [ "$i" = 2 ] && export TRITON_CACHE_DIR=/tmp/tc2 TORCHINDUCTOR_CACHE_DIR=/tmp/ic2
        { time tmo 150 python3 -m tritonsmith -v profile .kb/level1/19_ReLU.py benchmarks/candidates/relu.py \
            --device cuda --compiled --json > "$OUT/coldprof/run$i.json" 2> "$OUT/coldprof/run$i.log" ; } \
          2> "$OUT/coldprof/run${i}_wall_s.txt"
        echo "run $i: wall $(cat "$OUT/coldprof/run${i}_wall_s.txt") s"; grep -i "zygote" "$OUT/coldprof/run$i.log" | tail -3
        python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['stages_s'])" "$OUT/coldprof/run$i.json"
      done
      unset TRITON_CACHE_DIR TORCHINDUCTOR_CACHE_DIR ;;
    honest)
      # issue 17: no false rejections over the recorded suite kernels, hand-written and test candidates
      tmo "${HONEST_S:-420}" python3 benchmarks/evaluator_honest_gpu.py .kb --suite benchmarks/results/h200-2026-12-04/suite ${HONEST_ARGS:-} \
        2>&1 | grep -v Warning | tail -25 ;;
    shortk)
      # issue 17: speedup spread over 3 evaluations of short (< 0.1 ms) kernels
      tmo "${SHORTK_S:-300}" python3 benchmarks/short_kernels_gpu.py .kb --repeats 3 --divide "${SHORTK_DIVIDE:-64}" \
        2>&1 | grep -v Warning | tail -16 ;;
    generalize)
      # shellcheck disable=SC2086
      tmo "${GEN_S:-500}" python3 benchmarks/generalize_check.py ${GEN_RUN:-$PWD/.runs/suite} .kb --device cuda \
        --out "$OUT/generalize" --jobs "${GEN_JOBS:-1}" ${GEN_ARGS:-} 2>&1 | tail -40 ;;
    convtriton)
      # shellcheck disable=SC2086
      tmo "${CONVT_S:-290}" python3 benchmarks/conv_triton_gpu.py .kb --json "$OUT/conv_triton.json" ${CONVT_ARGS:-} \
        2>&1 | grep -v Warning | tee "$OUT/conv_triton.log" | tail -40 ;;
    convtiles)
      # shellcheck disable=SC2086
      tmo "${TILES_S:-240}" python3 benchmarks/conv_tiles_gpu.py "${KB:-.kb}" --json "$OUT/conv_tiles.json" ${TILES_ARGS:-} \
        2>&1 | grep -v Warning | tee "$OUT/conv_tiles.log" | tail -30 ;;
    wtg)
      # shellcheck disable=SC2086
      tmo "${WTG_S:-300}" python3 benchmarks/where_time_goes_gpu.py --json "$OUT/where_time_goes.json" ${WTG:-} 2>&1 \
        | grep -v -e Warning -e USDT | tee "$OUT/where_time_goes.md" | grep -E "^## |^\| " ;;
    rowk)
      # the row-reduction kernels of chosen launchers timed alone, under source variants ($ROWK: specs, see
      # benchmarks/row_kernels_gpu.py; $ROWK_VARIANTS: its variant names, default as-is; $ROWK_SPLIT: specs also
      # run with the split-only variants); then ncu on
      # one launch of $ROWK_NCU (a kernel name) when ncu is there
      # shellcheck disable=SC2086
      { tmo 150 python3 benchmarks/row_kernels_gpu.py ${ROWK:-} --variants "${ROWK_VARIANTS:-as-is}"
        [ -n "${ROWK_SPLIT:-}" ] && tmo 150 python3 benchmarks/row_kernels_gpu.py $ROWK_SPLIT --variants warps4,block1024,swapgrid
      } 2>&1 | grep -v Warning | tee "$OUT/row_kernels.md" | grep -E "^\||device"
      ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/ncu 2>/dev/null | head -1)
      if [ -n "${ROWK_NCU:-}" ] && [ -n "$ncu" ]; then
        # shellcheck disable=SC2086
        tmo 120 "$ncu" --kernel-name "$ROWK_NCU" --launch-skip 5 --launch-count 1 --section SpeedOfLight \
          --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis \
          python3 benchmarks/row_kernels_gpu.py ${ROWK_NCU_SPEC:-${ROWK%% *}} --variants as-is > "$OUT/row_kernels_ncu.txt" 2>&1
        grep -E "Duration|Throughput|Occupancy|Registers|Block Size|Grid Size|Stall|Warp Cycles|Issued" "$OUT/row_kernels_ncu.txt" | head -40
      else echo "ncu: ${ncu:-not found}"; fi ;;
    *) echo "unknown phase $phase" ;;
  esac
  pack
done
echo "=== done $(date -u +%T)"
