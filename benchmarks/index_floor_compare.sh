#!/bin/bash
# Usage: benchmarks/index_floor_compare.sh, with a checkout of main at /tmp/if/base (git archive main ctxbench) and
# /tmp/if/p1.toml, /tmp/if/p2.toml holding [index] parse_processes = 1 and = 2; results in /tmp/if/res_*
# back to back: main (before), this branch (default), this branch with one parser, this branch with two
echo -10 > /proc/$$/autogroup
A=/work/main/.clients/aider-venv/bin/python
run() { # name tree extra...
  local name=$1 tree=$2; shift 2
  echo "=== $name ($tree) $(date -u +%H:%M:%S) load: $(cut -d' ' -f1-3 /proc/loadavg)"
  (cd $tree && PYTHONPATH=$tree HF_HUB_OFFLINE=1 timeout 500 /work/main/.venv/bin/python -m ctxbench bench perf --only index --out /tmp/if/res_$name "$@" 2>&1 | grep -v "^cold index [0-9]\|^unchanged re-index\|^one file changed \.\.\.\|^aider repo map \.\.\.\|^copying\|^ast floor \.\.\.")
}
run before /tmp/if/base --aider-python $A
run after /work/wt-index-floor --aider-python $A
run after_one_process /work/wt-index-floor --config /tmp/if/p1.toml
run after_two_processes /work/wt-index-floor --config /tmp/if/p2.toml
echo "=== end $(date -u +%H:%M:%S) load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo 0 > /proc/$$/autogroup
