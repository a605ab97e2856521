#!/bin/sh
# The healthy launch path: start the worker with the environment it was given.
exec "$@"
