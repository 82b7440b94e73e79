#!/bin/bash
# substrates/glusterfs/stop.sh STATE — unmount both clients, stop glusterd;
# deleting the namespace ends the brick process glusterd spawned.
SUB_NAME=glusterfs
. "$(dirname "$0")/../substrate-lib.sh"
sub_teardown "${1:?usage: stop.sh STATE}"
