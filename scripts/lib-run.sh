# Sourced by the GPU round scripts (gpu-pad.sh, gpu-persist.sh): run TIMEOUT
# CMD... appends CMD's output to $log, prints its rc, and sets fail=1 where
# it is not 0. The caller sets log and fail first.
run() {
  local limit=$1
  shift
  echo "== $*" | tee -a "$log"
  timeout "$limit" "$@" >> "$log" 2>&1
  local rc=$?
  echo "== rc=$rc" | tee -a "$log"
  [ "$rc" -eq 0 ] || fail=1
}

# Sourced by the CPU round scripts (cpu-bench.sh, cpu-turns.sh): cpu_setup
# NAME makes the log folder out ($OUT, or ./cpu-logs) and sets tilefuse
# ($TILEFUSE, or .gpu/tilefuse; exits 2 where it is not there) and threads
# ($THREADS, or the CPUs).
cpu_setup() {
  out=${OUT:-cpu-logs}
  mkdir -p "$out"
  tilefuse=${TILEFUSE:-.gpu/tilefuse}
  if [ ! -x "$tilefuse" ]; then
    echo "$1: no $tilefuse: build it (go build -o $tilefuse ./cmd/tilefuse) or set TILEFUSE" >&2
    exit 2
  fi
  threads=${THREADS:-$(nproc)}
}

# settle waits until no process of PyTorch's compile worker pool is left
# (torch.compile's workers exit on their own once their parent is gone, a
# watchdog's poll later; until then, if still busy, they would share the
# cores with the next side's turn: presumed, not observed), at most SETTLE_MAX seconds (default 60), then SETTLE more
# (default 1). It prints what it waited for, if anything.
settle() {
  local t0=$SECONDS
  while pgrep -f 'compile_worker' > /dev/null 2>&1; do
    if [ $((SECONDS - t0)) -ge "${SETTLE_MAX:-60}" ]; then
      echo "settle: compile workers still running after ${SETTLE_MAX:-60} s" >&2
      break
    fi
    sleep 1
  done
  [ $((SECONDS - t0)) -gt 0 ] && echo "settle: waited $((SECONDS - t0)) s for compile workers to exit" >&2
  sleep "${SETTLE:-1}"
}
