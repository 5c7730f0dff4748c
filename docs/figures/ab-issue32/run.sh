#!/bin/bash
# A/B (issue 32): the tree before issue 32's restructuring (9543dfd) against main, alternating, one seed each.
set -u
cd /tmp
PY=/work/main/.venv/bin/python
for rep in 1 2; do
  for algo in dqn ddpg td3; do
    for side in before after; do
      tree=/work/main; [ $side = before ] && tree=/work/wt-before
      uptime >> /work/runs/ab/load.txt
      PYTHONPATH=$tree $PY -m pearl_fpga.cli bench train --algo $algo --steps 20000 --seeds 0 --no-sb3 --no-sbx \
        --eval-episodes 5 --json /work/runs/ab/$algo-$side-$rep.json > /work/runs/ab/$algo-$side-$rep.log 2>&1
      echo "$rep $algo $side rc=$?" >> /work/runs/ab/done.txt
    done
  done
done
