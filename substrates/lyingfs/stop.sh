#!/bin/bash
# substrates/lyingfs/stop.sh STATE — unmount both mounts, stop the daemons.
SUB_NAME=lyingfs
. "$(dirname "$0")/../substrate-lib.sh"
sub_teardown "${1:?usage: stop.sh STATE}"
