#!/bin/sh
# A launcher that rebuilds the worker environment from its own template and so loses the
# user's NCCL tuning (as in case 10 of shared/cases, inverted). NCCL_NVLS_ENABLE is kept.
exec env -u NCCL_ALGO -u NCCL_PROTO "$@"
