#!/bin/bash
# substrates/tmpfs/stop.sh STATE — unmount the tmpfs.
SUB_NAME=tmpfs
. "$(dirname "$0")/../substrate-lib.sh"
sub_teardown "${1:?usage: stop.sh STATE}"
