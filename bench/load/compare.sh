#!/usr/bin/env bash
# bench/load/compare.sh: the working tree against another revision, on the same machine in the
# same run, so that a change that costs throughput cannot land unseen (bench/README.md, "Every
# change a callback passes through"). Builds REV's payledger (Release) in a folder of its own,
# then runs bench/load/run.sh --mixed-only alternately with REV's binary and the working tree's
# (ABBA: the order flips every round, so that a machine that speeds up or slows down over the
# run favours neither), each on a fresh throwaway PostgreSQL, and prints for every round both
# figures and their ratio, then the medians.
#
#   bench/load/compare.sh --rev REV [--rounds 3] [--orders 20000] [--seconds 20]
#                         [--connections 64] [--max-loss PERCENT] [-- RUN_SH_ARGS...]
#   --rev REV       a commit, tag or branch (git rev-parse); its tree is exported with
#                   `git archive` into build-compare/<commit>/src and built there once
#   --rev-file F    REV is the first line of F that is not a comment (bench/baseline: the last
#                   landed round)
#   --rounds N      runs of each binary (default 3)
#   --logs DIR      keep every run's log (serve's, the load generator's, run.sh's) in DIR
#   --max-loss P    exit 1 when the working tree's median throughput, in either phase, is more
#                   than P % below REV's (default: none, report only)
#   --build-only    build REV's payledger (when not built yet) and stop: what the ctest
#                   BenchBaselineBuilds does beside other tests, before the timed comparison
#   after --         passed on to every bench/load/run.sh (--writer-cache-orders 0, --pg-setting …)
#
# The figure compared is callbacks/s of (a) fresh and (b) analyzed; p99 is printed beside it.
# Exits 0 when every run answered as expected and the loss, if bounded, is within it.
set -euo pipefail
shopt -s inherit_errexit
source "$(dirname "$0")/../../scripts/lib/common.sh"
source "$PAYLEDGER_ROOT/bench/lib/bench.sh"

REV=""
ROUNDS=3
ORDERS=20000
SECONDS_LIMIT=20
CONNECTIONS=64
MAX_LOSS=""
LOGS=""
BUILD_ONLY=""
EXTRA=()
while [ $# -gt 0 ]; do
    case "$1" in
        --rev) REV="$2"; shift 2 ;;
        --rev-file)
            REV="$(grep -v '^#' "$2" | grep -m1 -o '[^[:space:]]\+')" ||
                bench_die "--rev-file: no revision in $2"
            shift 2 ;;
        --rounds) ROUNDS="$2"; shift 2 ;;
        --orders) ORDERS="$2"; shift 2 ;;
        --seconds) SECONDS_LIMIT="$2"; shift 2 ;;
        --connections) CONNECTIONS="$2"; shift 2 ;;
        --max-loss) MAX_LOSS="$2"; shift 2 ;;
        --logs) LOGS="$2"; shift 2 ;;
        --build-only) BUILD_ONLY=1; shift ;;
        --) shift; EXTRA=("$@"); break ;;
        -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0"; exit 0 ;;
        *) bench_die "unknown argument: $1 (see --help)" ;;
    esac
done
[ -n "$REV" ] || bench_die "--rev REV is required"
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || bench_die "--rounds: a positive count"
[ -z "$MAX_LOSS" ] || [[ "$MAX_LOSS" =~ ^[0-9]+(\.[0-9]+)?$ ]] || bench_die "--max-loss: a percentage"

if ! COMMIT="$(git -C "$PAYLEDGER_ROOT" rev-parse --verify --quiet "$REV^{commit}")"; then
    # A shallow clone, or an archive without history: nothing to compare with (exit 77, which
    # the ctest reports as skipped, saying so).
    echo "[bench] $REV is not a commit of this checkout (shallow clone?): nothing compared" >&2
    exit 77
fi
COMPARE_DIR="$PAYLEDGER_ROOT/build-compare/$COMMIT"
REV_BIN="$COMPARE_DIR/build/payledger"
bench_tmp_create
trap 'rm -rf "$BENCH_TMP"' EXIT
if [ ! -x "$REV_BIN" ]; then
    bench_log "building $REV ($COMMIT) in $COMPARE_DIR"
    rm -rf "$COMPARE_DIR/src"
    mkdir -p "$COMPARE_DIR/src"
    git -C "$PAYLEDGER_ROOT" archive "$COMMIT" | tar -x -C "$COMPARE_DIR/src"
    # Warnings are not errors here: an older tree may warn under a newer toolchain.
    if ! { cmake -S "$COMPARE_DIR/src" -B "$COMPARE_DIR/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DBUILD_TESTING=OFF -DPAYLEDGER_BUILD_BENCH=OFF -DPAYLEDGER_UNITY_BUILD=ON &&
        cmake --build "$COMPARE_DIR/build" -j "$(nproc)" --target payledger; } \
        >"$BENCH_TMP/build.log" 2>&1; then
        tail -30 "$BENCH_TMP/build.log" >&2
        bench_die "$REV does not build (log above)"
    fi
fi
if [ -n "$BUILD_ONLY" ]; then
    bench_log "$REV ($COMMIT) is built: $REV_BIN"
    exit 0
fi
# The working tree's binary and load generator, as run.sh builds them.
bench_build payledger payledger_loadgen
TREE_BIN="$BENCH_BUILD_DIR/payledger"

# run_one NAME BINARY: one run.sh of BINARY; its figures in $BENCH_TMP/NAME.summary.
run_one() {
    bench_log "round $round: $1"
    "$PAYLEDGER_ROOT/bench/load/run.sh" --mixed-only --bin "$2" --orders "$ORDERS" \
        --seconds "$SECONDS_LIMIT" --connections "$CONNECTIONS" \
        --summary "$BENCH_TMP/$1.summary" "${EXTRA[@]}" >"$BENCH_TMP/$1.out" 2>"$BENCH_TMP/$1.log" ||
        { tail -30 "$BENCH_TMP/$1.log" >&2; bench_die "the run of $1 failed (log above)"; }
    [ -z "$LOGS" ] || cp "$BENCH_TMP/$1.log" "$BENCH_TMP/$1.out" "$LOGS/"
}
value() { sed -n "s/^$2=//p" "$BENCH_TMP/$1.summary"; }
[ -z "$LOGS" ] || mkdir -p "$LOGS"

declare -a RATIO_FRESH RATIO_ANALYZED
LINES=()
for round in $(seq 1 "$ROUNDS"); do
    if [ $((round % 2)) -eq 1 ]; then
        run_one "rev_$round" "$REV_BIN"
        run_one "tree_$round" "$TREE_BIN"
    else
        run_one "tree_$round" "$TREE_BIN"
        run_one "rev_$round" "$REV_BIN"
    fi
    line="| $round |"
    for phase in fresh analyzed; do
        r="$(value "rev_$round" "${phase}_rps")"
        t="$(value "tree_$round" "${phase}_rps")"
        ratio="$(bench_calc "$t / $r")"
        [ "$phase" = fresh ] && RATIO_FRESH+=("$ratio") || RATIO_ANALYZED+=("$ratio")
        line+=" $(bench_fmt 0 "$r")/s (p99 $(value "rev_$round" "${phase}_p99_ms") ms) |"
        line+=" $(bench_fmt 0 "$t")/s (p99 $(value "tree_$round" "${phase}_p99_ms") ms) |"
        line+=" $(bench_fmt 3 "$ratio") |"
    done
    LINES+=("$line")
    bench_log "round $round:$line"
done
MEDIAN_FRESH="$(bench_median "${RATIO_FRESH[@]}")"
MEDIAN_ANALYZED="$(bench_median "${RATIO_ANALYZED[@]}")"
TREE_COMMIT="$(git -C "$PAYLEDGER_ROOT" rev-parse --short HEAD)"
[ -z "$(git -C "$PAYLEDGER_ROOT" status --porcelain --untracked-files=no)" ] ||
    TREE_COMMIT="$TREE_COMMIT + changes"
{
    echo
    echo "### bench/load/compare.sh"
    echo
    echo "\`bench/load/compare.sh --rev $REV --rounds $ROUNDS --orders $ORDERS --seconds" \
        "$SECONDS_LIMIT --connections $CONNECTIONS${EXTRA[*]:+ -- ${EXTRA[*]}}\` — $(bench_machine)"
    echo
    echo "| round | (a) fresh: $REV (${COMMIT:0:7}) | (a) fresh: tree ($TREE_COMMIT) | ratio" \
        "| (b) analyzed: $REV | (b) analyzed: tree | ratio |"
    echo "| --- | --- | --- | --- | --- | --- | --- |"
    printf '%s\n' "${LINES[@]}"
    echo
    echo "Median ratio (tree ÷ $REV): (a) fresh $(bench_fmt 3 "$MEDIAN_FRESH")," \
        "(b) analyzed $(bench_fmt 3 "$MEDIAN_ANALYZED")."
}
if [ -n "$MAX_LOSS" ]; then
    floor="$(bench_calc "1 - $MAX_LOSS / 100")"
    for median in "$MEDIAN_FRESH" "$MEDIAN_ANALYZED"; do
        if awk -v m="$median" -v f="$floor" 'BEGIN { exit !(m < f) }'; then
            bench_die "the working tree lost more than $MAX_LOSS % against $REV (median ratio $median)"
        fi
    done
    bench_log "within --max-loss $MAX_LOSS %"
fi
