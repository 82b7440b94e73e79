#!/bin/bash
# ci/deps.sh [--check] build|test|bench|matrix — install the Debian 12 packages
# kaas needs that are missing.  Idempotent: when everything is present it
# only runs dpkg queries.  With --check it installs nothing: it names what is
# missing and exits 1.  Only make deps*, test, run, bench and matrix install;
# everything else (make e2e and the scripts it runs) at most checks.
set -euo pipefail
cd "$(dirname "$0")/.."

check_only=0
if [ "${1:-}" = --check ]; then
	check_only=1
	shift
fi

BUILD_PKGS=(gcc make pkg-config libc6-dev
	libuv1-dev libjansson-dev liblz4-dev libzstd-dev zlib1g-dev libsnappy-dev
	libnfs-dev libisal-dev libssl-dev libpcre2-dev check)
# What the test suites start or drive: servers, real Kafka clients, fault tools.
TEST_PKGS=(clang libclang-rt-14-dev iproute2 procps psmisc util-linux e2fsprogs
	nfs-ganesha nfs-ganesha-vfs nfs-ganesha-mem rpcbind libnfs-utils
	kcat librdkafka-dev python3 python3-confluent-kafka python3-kafka
	eatmydata golang-go golang-github-shopify-sarama-dev nodejs npm
	fuse3 libfuse3-dev strace python3-yaml prometheus curl nftables openssl)

# What `make bench` adds (ci/bench/run.sh): plots and instruction counts.
BENCH_PKGS=(gnuplot-nox valgrind)

# What the real-substrate matrix (make matrix) stands up on top of that.
MATRIX_PKGS=(ceph-mon ceph-osd ceph-mds ceph-fuse ceph-common
	glusterfs-server glusterfs-client s3fs sshfs openssh-server openssh-client
	samba smbclient smbnetfs fuse3 libfuse3-dev jq curl)

want=("${BUILD_PKGS[@]}")
[ "${1:-build}" = test ] && want+=("${TEST_PKGS[@]}")
[ "${1:-build}" = matrix ] && want+=("${TEST_PKGS[@]}" "${MATRIX_PKGS[@]}")
[ "${1:-build}" = bench ] && want+=("${TEST_PKGS[@]}" "${BENCH_PKGS[@]}")

missing=()
for p in "${want[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node/npm may come from elsewhere than Debian on some machines; accept that.
if command -v node >/dev/null && command -v npm >/dev/null; then
	m2=(); for p in "${missing[@]}"; do case $p in nodejs|npm) ;; *) m2+=("$p");; esac; done
	missing=("${m2[@]+"${m2[@]}"}")
fi
[ ${#missing[@]} -eq 0 ] && exit 0
if [ $check_only = 1 ]; then
	echo "ci/deps.sh: missing packages: ${missing[*]} (make deps-test or make bench installs them)" >&2
	exit 1
fi

if [ "$(id -u)" != 0 ]; then
	echo "ci/deps.sh: missing packages: ${missing[*]} (run as root, or install them)" >&2
	exit 1
fi
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt() { apt-get -o DPkg::Lock::Timeout=600 -y --no-install-recommends install "$@"; }
if ! apt "${missing[@]}"; then
	apt-get -o DPkg::Lock::Timeout=600 update
	apt "${missing[@]}"
fi
