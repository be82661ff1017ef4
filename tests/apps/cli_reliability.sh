#!/bin/sh
# The ember binary under hostile input (issue #12): every failure is one line on stderr and
# exit status 1 (2 for usage), never an abort, a hang or a replaced device node.
#   cli_reliability.sh <ember binary> <case>
set -u
ember=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/ember_cli_rel.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1

# Runs ember with a 30 s limit; passes when the status is $1 and stderr is one line matching $2.
expect() {
  want=$1 pattern=$2
  shift 2
  timeout 30 "$ember" "$@" >out.txt 2>err.txt
  got=$?
  lines=$(wc -l <err.txt)
  if [ "$got" -ne "$want" ] || [ "$lines" -ne 1 ] || ! grep -q -- "$pattern" err.txt; then
    echo "ember $*: status $got (want $want), $lines stderr lines (want 1), stderr:"
    cat err.txt
    exit 1
  fi
}

# A safetensors file with no tensors and the given __metadata__ JSON (at most 240 bytes): the
# header is padded to 256 bytes, so the length prefix is the constant 256 (little-endian).
checkpoint_with_metadata() {
  printf '\000\001\000\000\000\000\000\000' >"$1"
  printf '%-256s' "{\"__metadata__\":$2}" >>"$1"
}

case $2 in
  empty_save) expect 2 "expected a file name" train mnist --save '' ;;
  negative_seed) expect 2 "seed" train mnist --seed -1 ;;
  save_to_device) expect 1 "not a regular file (a device)" train mnist --data nowhere --save /dev/null
                  test -c /dev/null || { echo "/dev/null was replaced"; exit 1; } ;;
  resume_fifo) mkfifo pipe && expect 1 "expected a regular file, got a FIFO" train mnist --data nowhere --resume pipe ;;
  bad_seed_in_checkpoint)
    checkpoint_with_metadata ck.safetensors '{"format":"ember.training_checkpoint.v1","progress":"{\"epoch\":1,\"step\":0,\"counters\":{}}","rng":"{}","config":"{\"seed\":\"abc\"}"}'
    expect 1 "config.seed: expected an unsigned 64-bit integer" train mnist --data nowhere --resume ck.safetensors ;;
  missing_progress)
    checkpoint_with_metadata ck.safetensors '{"format":"ember.training_checkpoint.v1","rng":"{}","config":"{}"}'
    expect 1 "has no 'progress' entry" train mnist --data nowhere --resume ck.safetensors ;;
  *) echo "unknown case $2"; exit 1 ;;
esac
