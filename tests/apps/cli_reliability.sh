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

# <prefix>-images-idx3-ubyte and <prefix>-labels-idx1-ubyte with $2 images of 28x28 noise
# (Park-Miller, deterministic) and labels 0..9 in turn, uncompressed.
write_idx_mnist() {
  LC_ALL=C awk -v n="$2" -v images="$1-images-idx3-ubyte" -v labels="$1-labels-idx1-ubyte" '
    function be32(v, file) { printf "%c%c%c%c", int(v / 16777216) % 256, int(v / 65536) % 256, int(v / 256) % 256, v % 256 > file }
    BEGIN {
      printf "%c%c%c%c", 0, 0, 8, 3 > images; be32(n, images); be32(28, images); be32(28, images)
      x = 7
      for (i = 0; i < n * 784; i++) { x = (x * 16807) % 2147483647; printf "%c", x % 256 > images }
      printf "%c%c%c%c", 0, 0, 8, 1 > labels; be32(n, labels)
      for (i = 0; i < n; i++) printf "%c", i % 10 > labels
    }'
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
  detect_anomaly)  # a run that diverges: --detect-anomaly names the first op to produce NaN/Inf
    write_idx_mnist train 640 && write_idx_mnist t10k 64
    train="train mnist --data . --model mnist_cnn --epochs 2 --batch-size 32 --seed 7 --save ck.safetensors"
    timeout 60 "$ember" $train --stop-after 1 >/dev/null 2>&1 || { echo "the good run failed"; exit 1; }
    cp ck.safetensors good.safetensors
    expect 1 "anomaly: \(forward\|backward\) of [a-z_0-9]* \(produced\|returned\) \(-\?Inf\|NaN\) at element" \
      $train --lr 1e6 --detect-anomaly
    grep -q "(epoch 1, step [0-9]*, batch [0-9]* of 20)" err.txt || { cat err.txt; echo "no epoch and step"; exit 1; }
    grep -q "the last checkpoint is unchanged" err.txt || { cat err.txt; echo "no word on the checkpoint"; exit 1; }
    cmp -s ck.safetensors good.safetensors || { echo "the last good checkpoint was overwritten"; exit 1; }
    expect 1 "training diverged" $train --lr 1e6 ;;  # without the flag: only the loss is seen
  *) echo "unknown case $2"; exit 1 ;;
esac
