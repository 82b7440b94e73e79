#!/bin/bash
# ci/tls/gen_certs.sh DIR — the certificates of the TLS tests, made with the
# openssl CLI: a CA; a server certificate for localhost/127.0.0.1; a client
# certificate (CN=alice,O=kaas-test); an expired one (CN=bob, 2020); a second
# CA nobody trusts, with a client certificate of its own (CN=mallory).
# Every leaf also as NAME.keystore.pem (key and certificate in one file).
set -euo pipefail
d=$1
mkdir -p "$d"
cd "$d"
q() { "$@" >/dev/null 2>&1 || { echo "gen_certs.sh: $* failed" >&2; "$@"; exit 1; }; }
ca() { # name
	q openssl req -x509 -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.pem" -days 30 -subj "/CN=$1"
}
leaf() { # name ca subj ext days|expired
	q openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$3"
	printf '%s\n' "$4" > "$1.ext"
	if [ "$5" = expired ]; then
		# x509 -req cannot set dates in the past; `openssl ca` can.
		mkdir -p "ca-$2"
		: > "ca-$2/index.txt"
		printf '[ca]\ndefault_ca=d\n[d]\ndatabase=ca-%s/index.txt\nnew_certs_dir=ca-%s\nserial=ca-%s/serial\ndefault_md=sha256\npolicy=p\n[p]\ncommonName=supplied\n' \
			"$2" "$2" "$2" > "ca-$2/ca.cnf"
		echo 1000 > "ca-$2/serial"
		q openssl ca -batch -config "ca-$2/ca.cnf" -cert "$2.pem" -keyfile "$2.key" -in "$1.csr" -out "$1.pem" \
			-notext -startdate 20200101000000Z -enddate 20200102000000Z -extfile "$1.ext"
	else
		q openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -set_serial $RANDOM -out "$1.pem" \
			-extfile "$1.ext" -days "$5"
	fi
	cat "$1.key" "$1.pem" > "$1.keystore.pem"
}
ca ca
ca otherca
leaf server ca "/CN=localhost" "subjectAltName=DNS:localhost,IP:127.0.0.1" 30
leaf client ca "/CN=alice/O=kaas-test" "extendedKeyUsage=clientAuth" 30
leaf badclient otherca "/CN=mallory" "extendedKeyUsage=clientAuth" 30
leaf oldclient ca "/CN=bob" "extendedKeyUsage=clientAuth" expired
q openssl pkey -in server.key -aes256 -passout pass:kaas-secret -out server.enc.key
