#!/bin/bash
# substrates/bind/stop.sh STATE — unmount the bind mount, then the tmpfs.
SUB_NAME=bind
. "$(dirname "$0")/../substrate-lib.sh"
sub_teardown "${1:?usage: stop.sh STATE}"
