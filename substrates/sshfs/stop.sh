#!/bin/bash
# substrates/sshfs/stop.sh STATE — unmount both clients, stop sshd.
SUB_NAME=sshfs
. "$(dirname "$0")/../substrate-lib.sh"
sub_teardown "${1:?usage: stop.sh STATE}"
