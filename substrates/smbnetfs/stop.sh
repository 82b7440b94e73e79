#!/bin/bash
# substrates/smbnetfs/stop.sh STATE — unmount both clients, stop smbd, delete
# the network namespace (and whatever still runs in it).
SUB_NAME=smbnetfs
. "$(dirname "$0")/../substrate-lib.sh"
sub_teardown "${1:?usage: stop.sh STATE}"
