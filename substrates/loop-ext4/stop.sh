#!/bin/bash
# substrates/loop-ext4/stop.sh STATE — unmount, detach the loop devices.
SUB_NAME=loop-ext4
. "$(dirname "$0")/../substrate-lib.sh"
sub_teardown "${1:?usage: stop.sh STATE}"
