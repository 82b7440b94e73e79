#!/bin/bash
# substrates/local/stop.sh STATE — nothing runs; the caller removes STATE.
SUB_NAME=local
. "$(dirname "$0")/../substrate-lib.sh"
sub_teardown "${1:?usage: stop.sh STATE}"
