#!/bin/sh
# A launcher prefix that does not pass NCCL tuning through to its workers:
# it starts the command with NCCL_ALGO and NCCL_PROTO removed from the environment
# (as a cluster launcher with an allow-list of variables would).
# Usage: forensics snapshot --nccl-init --launcher examples/h200x2/drop-algo-proto.sh
exec env -u NCCL_ALGO -u NCCL_PROTO "$@"
