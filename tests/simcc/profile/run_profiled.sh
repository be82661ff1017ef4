#!/bin/sh
# Compiles a profiler test program with `ember-simcc --profile` and runs it. Without clang 16
# or later the test is skipped (EMBER_TEST_SKIPPED, the repository's skip marker), with the
# script's own message saying what to install.
#   run_profiled.sh <ember-simcc> <program.cu> <binary> [arguments...]
simcc="$1" source="$2" binary="$3"
shift 3
if ! out="$("$simcc" --profile -O1 -Wall -Werror "$source" -o "$binary" 2>&1)"; then
  case "$out" in
    *"needs clang++ 16 or later"*) echo "EMBER_TEST_SKIPPED: $out"; exit 0 ;;
  esac
  echo "$out"
  exit 1
fi
exec "$binary" "$@"
