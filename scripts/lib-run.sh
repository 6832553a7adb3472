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
