#!/bin/sh
# The runner containers' entrypoint (docker-compose.yml's x-runner): makes the container's own
# cgroup tree one the runner can put job groups in, then starts the runner (docs/gpu-runner.md,
# "Containers"). Needs the service's `cgroup: private` (a cgroup namespace of its own, so
# /sys/fs/cgroup shows only this container's group) and CAP_SYS_ADMIN (for the remount).
# Whatever fails here, the runner's start-up check says so once, with the fix, and refuses
# leaderboard jobs (runner/containment/cgroups.py: containment_problem).
set -u
cg=/sys/fs/cgroup

# 1. Docker mounts the cgroup tree read-only; in this container's mount namespace, make each
#    cgroup mount read-write (only this container's subtree is visible under it)
for m in $(awk '$5 ~ "^/sys/fs/cgroup" { print $5 }' /proc/self/mountinfo); do
    # the mount's own flag first (what Docker sets), then its file system's
    mount -o remount,bind,rw "$m" 2>/dev/null || mount -o remount,rw "$m" 2>/dev/null \
        || echo "runner-entrypoint: could not remount $m read-write" >&2
done

# 2. cgroup v2 enables a controller for child groups only in a group that holds no process
#    itself: move this container's processes into a leaf group, then enable pids and memory for
#    the groups beside it (the runner's job groups go under $cg/kernelrank)
if [ -f "$cg/cgroup.controllers" ] && [ -w "$cg/cgroup.procs" ]; then
    mkdir -p "$cg/runner"
    for pid in $(cat "$cg/cgroup.procs"); do
        echo "$pid" > "$cg/runner/cgroup.procs" 2>/dev/null || true  # a process that just ended
    done
    for controller in pids memory; do
        if grep -qw "$controller" "$cg/cgroup.controllers"; then
            echo "+$controller" > "$cg/cgroup.subtree_control" \
                || echo "runner-entrypoint: could not enable the $controller controller" >&2
        fi
    done
fi

exec "$@"
