#!/bin/bash
# substrates/s3fs/stop.sh STATE — unmount both clients, stop s3rver.
SUB_NAME=s3fs
. "$(dirname "$0")/../substrate-lib.sh"
sub_teardown "${1:?usage: stop.sh STATE}"
