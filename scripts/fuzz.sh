#!/usr/bin/env bash
# Runs every cargo-fuzz target in fuzz/ for SECONDS each.
#
#   scripts/fuzz.sh [-j JOBS] SECONDS [TARGET...]
#
# Builds the targets (`cargo +nightly fuzz build`, address sanitizer,
# release with debug assertions), writes seed corpora from the repository's
# test data (fuzz/make_seeds.py: tests/conformance, tests/fixtures, examples,
# policies) into fuzz/seeds/, and runs each target for SECONDS on its
# corpus, fuzz/corpus/TARGET (kept between runs; it grows with every input
# that reached new code), plus its seeds. Targets run one after the other;
# -j JOBS runs up to JOBS at once (each libFuzzer process uses one core).
# Naming targets runs only those.
#
# Prints the executions of each target and a summary; exits 1 when any
# target crashed (a panic, a broken invariant, a timeout, an out-of-memory),
# naming the input that did it (fuzz/artifacts/TARGET/...) and the command
# that replays it; exits 2 when the tools are missing or the build fails.
#
# Settings: FUZZ_TIMEOUT (10): seconds one input may take, the review
# deadline the server gives a request; FUZZ_RSS_MB (2048): memory limit of
# a run; FUZZ_ARGS: more libFuzzer flags for every target (e.g.
# FUZZ_ARGS=-max_len=2048); FUZZ_SANITIZER (address): none builds faster
# and runs more inputs a second, at the price of the checks address
# sanitizer adds to the unsafe code in dependencies; FUZZ_CODEGEN_UNITS
# (cargo-fuzz's 1: the fastest code, built on one core per crate): 16
# builds several times faster on a few cores, for short runs such as CI's;
# FUZZ_TARGET_DIR (fuzz/target): where the build goes (a directory kept
# between runs saves rebuilding the dependencies); FUZZ_BUILD_ONLY=1: build
# the targets, run none.
#
# Needs the nightly toolchain (`rustup toolchain install nightly`),
# cargo-fuzz (`cargo install cargo-fuzz --locked`) and python3.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
    echo "usage: scripts/fuzz.sh [-j JOBS] SECONDS [TARGET...]" >&2
    exit 2
}

jobs=1
while getopts "j:h" opt; do
    case $opt in
        j) jobs=$OPTARG ;;
        *) usage ;;
    esac
done
shift $((OPTIND - 1))
[[ $# -ge 1 ]] || usage
seconds=$1
shift
[[ $seconds =~ ^[0-9]+$ && $seconds -gt 0 ]] || {
    echo "scripts/fuzz.sh: SECONDS must be a positive whole number, not '$seconds'" >&2
    exit 2
}
[[ $jobs =~ ^[0-9]+$ && $jobs -gt 0 ]] || {
    echo "scripts/fuzz.sh: JOBS must be a positive whole number, not '$jobs'" >&2
    exit 2
}

all_targets=(review_raw review_structured check_yaml policy_load cel_compile)
if [[ $# -gt 0 ]]; then
    targets=("$@")
    for t in "${targets[@]}"; do
        [[ " ${all_targets[*]} " == *" $t "* ]] || {
            echo "scripts/fuzz.sh: no target '$t' (targets: ${all_targets[*]})" >&2
            exit 2
        }
    done
else
    targets=("${all_targets[@]}")
fi

if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "scripts/fuzz.sh: the nightly Rust toolchain is missing (cargo-fuzz needs it):" >&2
    echo "  rustup toolchain install nightly --profile minimal" >&2
    exit 2
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "scripts/fuzz.sh: cargo-fuzz is missing:" >&2
    echo "  cargo install cargo-fuzz --locked" >&2
    exit 2
fi
if ! command -v python3 >/dev/null 2>&1; then
    echo "scripts/fuzz.sh: python3 is missing (it writes the seed corpora)" >&2
    exit 2
fi

sanitizer=${FUZZ_SANITIZER:-address}
timeout=${FUZZ_TIMEOUT:-10}
rss_mb=${FUZZ_RSS_MB:-2048}
read -r -a extra <<<"${FUZZ_ARGS:-}"

target_dir=${FUZZ_TARGET_DIR:-fuzz/target}
build_flags=(--sanitizer "$sanitizer" --target-dir "$target_dir")
if [[ -n ${FUZZ_CODEGEN_UNITS:-} ]]; then
    build_flags+=(--codegen-units "$FUZZ_CODEGEN_UNITS")
fi
triple=$(rustc +nightly -vV | sed -n 's/^host: //p')
bin=$target_dir/$triple/release

echo "== building the fuzz targets (${build_flags[*]})"
build_start=$SECONDS
cargo +nightly fuzz build "${build_flags[@]}" || {
    echo "scripts/fuzz.sh: the build failed" >&2
    exit 2
}
echo "built in $((SECONDS - build_start)) s"
# FUZZ_BUILD_ONLY=1: stop here (.ci/run builds the targets while the
# tests run, then fuzzes after them).
if [[ ${FUZZ_BUILD_ONLY:-} == 1 ]]; then
    exit 0
fi

echo "== seed corpora from the test data (fuzz/seeds/)"
python3 fuzz/make_seeds.py . fuzz/seeds

logs=$(mktemp -d /tmp/draguard-fuzz.XXXXXX)

# Flags of one target beyond the common ones.
target_flags() {
    case $1 in
        # Past the 10 KiB selector limit, so the length check is crossed.
        cel_compile) echo "-dict=fuzz/dicts/cel.dict -max_len=12000" ;;
        *) echo "" ;;
    esac
}

run_target() {
    local t=$1 flags
    read -r -a flags <<<"$(target_flags "$t")"
    mkdir -p "fuzz/corpus/$t" "fuzz/artifacts/$t"
    # The binary itself, not `cargo fuzz run`, which would ask cargo again
    # whether anything needs rebuilding. The ASAN option is the one
    # cargo-fuzz sets. -print_final_stats: the execution count; -timeout
    # and -rss_limit_mb make a slow or memory-hungry input a finding, not
    # a stall.
    ASAN_OPTIONS="detect_odr_violation=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
        "$bin/$t" "fuzz/corpus/$t" "fuzz/seeds/$t" -artifact_prefix="fuzz/artifacts/$t/" \
        -max_total_time="$seconds" -timeout="$timeout" -rss_limit_mb="$rss_mb" \
        -print_final_stats=1 "${flags[@]}" "${extra[@]}" >"$logs/$t.log" 2>&1
}

echo "== fuzzing ${#targets[@]} targets for $seconds s each, $jobs at a time (logs: $logs)"
declare -A status
running=0
for t in "${targets[@]}"; do
    if [[ $jobs -eq 1 ]]; then
        echo "-- $t"
        if run_target "$t"; then status[$t]=0; else status[$t]=$?; fi
    else
        (run_target "$t") &
        status[$t]=pid:$!
        running=$((running + 1))
        if [[ $running -ge $jobs ]]; then
            wait -n || true
            running=$((running - 1))
        fi
    fi
done
if [[ $jobs -gt 1 ]]; then
    for t in "${targets[@]}"; do
        if wait "${status[$t]#pid:}"; then status[$t]=0; else status[$t]=$?; fi
    done
fi

echo "== summary"
failed=0
printf '%-18s %12s %10s  %s\n' target executions exec/s result
for t in "${targets[@]}"; do
    log=$logs/$t.log
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
    if [[ ${status[$t]} -eq 0 ]]; then
        result=ok
    else
        failed=$((failed + 1))
        artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
        if [[ -n $artifact ]]; then
            result="CRASH: $artifact"
        else
            result="FAILED (exit ${status[$t]}; see $log)"
        fi
    fi
    printf '%-18s %12s %10s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "$result"
done
for t in "${targets[@]}"; do
    [[ ${status[$t]} -ne 0 ]] || continue
    log=$logs/$t.log
    echo
    echo "== $t: what failed (from $log)"
    grep -m 1 -A 12 -E "panicked at|ERROR: libFuzzer|==ERROR|timeout after|out-of-memory" "$log" || tail -n 20 "$log"
    artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
    if [[ -n $artifact ]]; then
        echo "replay: $bin/$t $artifact   (or: cargo +nightly fuzz run $t $artifact)"
    fi
done
if [[ $failed -gt 0 ]]; then
    echo "$failed of ${#targets[@]} targets failed"
    exit 1
fi
echo "${#targets[@]} targets ran for $seconds s each with no crash"
