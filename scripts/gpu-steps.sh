# Sourced first by each scripts/gpu-*.sh on the lent H200 (carry .whl): this checkout
# installed afresh over what an earlier run left (gpu-prelude.sh), the compile cache and
# $OUT set, and `step NAME LIMIT CMD...`: CMD under a time limit, its output in
# $OUT/NAME.log, its last $TAIL lines (default 4) and its exit status and time on stdout.
rm -rf /tmp/site/zyx /tmp/site/zyx_* /tmp/site/zyx*.dist-info
source scripts/gpu-prelude.sh || return 1
export ZYX_CACHE_DIR=/tmp/zyx-cache OUT=${OUT:-.}
step() { local name=$1 limit=$2; shift 2; local start=$SECONDS
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1; local status=$?
  tail -n "${TAIL:-4}" "$OUT/$name.log"; echo "== $name: exit $status, $((SECONDS - start)) s"; }
