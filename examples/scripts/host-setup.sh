#!/bin/bash
# Runs on every worker's node, outside its container, before `setup_script`
# (recipe key `host_setup`).
set -euo pipefail
echo "host setup on $(hostname)"
