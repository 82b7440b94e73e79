#!/bin/bash
# substrates/cephfs/stop.sh STATE — unmount the clients (and let them close
# their sessions), then stop the MDS, OSD and monitor, delete the namespace.
SUB_NAME=cephfs
. "$(dirname "$0")/../substrate-lib.sh"
sub_teardown "${1:?usage: stop.sh STATE}"
