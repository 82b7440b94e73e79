#!/bin/bash
# substrates/s3fs/start.sh STATE — s3fs-fuse over a local fake S3 server
# (s3rver, from npm), two mounts of one bucket: two clients.  Rename is a
# copy followed by a delete, O_EXCL is not enforced by S3, and a file's new
# contents reach other clients only after upload: the tool must fail it.
# s3rver is installed on first use into $KAAS_CACHE (default
# ~/.cache/kaas)/s3rver.
set -euo pipefail
SUB_NAME=s3fs
. "$(dirname "$0")/../substrate-lib.sh"
sub_init "$1"
sub_start_guard
command -v s3fs >/dev/null || sub_die "s3fs is not installed (ci/deps.sh matrix)"
command -v node >/dev/null && command -v npm >/dev/null || sub_die "node and npm are needed for s3rver"
cache=${KAAS_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/kaas}/s3rver
if [ ! -x "$cache/node_modules/.bin/s3rver" ]; then
	sub_log "installing s3rver@3 into $cache"
	mkdir -p "$cache"
	( cd "$cache" && { [ -f package.json ] || npm init -y >/dev/null; } &&
	  npm install --no-audit --no-fund --loglevel=error s3rver@3 >/dev/null )
fi
s3ver=$(sed -n 's/^ *"version": *"\(.*\)".*/\1/p' "$cache/node_modules/s3rver/package.json" | head -1)
mkdir -p "$STATE/s3data" "$STATE/mA" "$STATE/mB"
port=$(sub_free_port)
bucket=kaas-matrix
setsid node "$cache/node_modules/.bin/s3rver" -d "$STATE/s3data" -a 127.0.0.1 -p "$port" \
	--silent --configure-bucket "$bucket" --allow-mismatched-signatures \
	</dev/null >"$STATE/s3rver.log" 2>&1 &
sub_record pidnow $!
sub_wait 20 curl -sf -o /dev/null "http://127.0.0.1:$port/$bucket" || sub_die "s3rver did not answer on $port"
# s3rver accepts exactly these credentials
echo 'S3RVER:S3RVER' >"$STATE/passwd"
chmod 600 "$STATE/passwd"
for m in mA mB; do
	sub_record mount "$STATE/$m"
	s3fs "$bucket" "$STATE/$m" -o passwd_file="$STATE/passwd",url="http://127.0.0.1:$port" \
		-o use_path_request_style,nomultipart,dbglevel=warn,logfile="$STATE/s3fs-$m.log"
done
sub_wait 10 sh -c "findmnt -no FSTYPE '$STATE/mA' | grep -q fuse && findmnt -no FSTYPE '$STATE/mB' | grep -q fuse" \
	|| sub_die "s3fs did not mount"
mkdir "$STATE/mA/data"
sub_wait 10 test -d "$STATE/mB/data" || sub_die "the second s3fs mount does not see the first's directory"
SUB_URL=$STATE/mA/data
SUB_MOUNTS=$STATE/mB/data
SUB_INFO="$(s3fs --version 2>&1 | grep -o 'V[0-9.]*' | head -1 | sed 's/^/s3fs /') over s3rver $s3ver on 127.0.0.1:$port"
sub_publish
