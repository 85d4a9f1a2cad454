#!/bin/bash
# Runs before every worker's program, in its container (recipe key `setup_script`).
set -euo pipefail
echo "worker setup on $(hostname): ${SRT_RESOURCE:-?}"
