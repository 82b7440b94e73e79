#!/bin/bash
# substrates/overlay/stop.sh STATE — unmount the overlay, then its upper tmpfs.
SUB_NAME=overlay
. "$(dirname "$0")/../substrate-lib.sh"
sub_teardown "${1:?usage: stop.sh STATE}"
