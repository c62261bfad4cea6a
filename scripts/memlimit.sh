#!/usr/bin/env bash
# (A copy of the measuring tool the project was given.)
# Run a command under a memory limit the way a container runtime enforces
# resources.limits.memory: a fresh memory cgroup (v1 or v2, under the
# caller's own), the kernel OOM-kills the process past the limit.
#   memlimit.sh MB CMD [ARGS...]      the command is exec'd (same PID) in
#                                     the cgroup; its path is written to
#                                     $MEMLIMIT_CG_FILE when set
#   memlimit.sh --report CGPATH       prints limit, peak, OOM kills; removes
#                                     the cgroup (once it is empty)
# Needs write access to the caller's memory cgroup (root in a container
# with a delegated cgroup does). deploy/base sets limits.memory: 256Mi.
set -u
if [ "${1:-}" = --report ]; then
  cg=$2
  if [ -f "$cg/memory.max_usage_in_bytes" ]; then           # v1
    peak=$(cat "$cg/memory.max_usage_in_bytes"); lim=$(cat "$cg/memory.limit_in_bytes")
    ooms=$(awk '/oom_kill /{print $2}' "$cg/memory.oom_control")
    fails=$(cat "$cg/memory.failcnt")
  else                                                       # v2
    peak=$(cat "$cg/memory.peak" 2>/dev/null || echo 0); lim=$(cat "$cg/memory.max")
    ooms=$(awk '/oom_kill /{print $2}' "$cg/memory.events"); fails=$(awk '/^max /{print $2}' "$cg/memory.events")
  fi
  echo "cgroup limit $((lim >> 20)) MiB, peak $((peak >> 20)) MiB, limit hits $fails, OOM kills ${ooms:-0}"
  rmdir "$cg" 2>/dev/null
  exit 0
fi
mb=$1; shift
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
  parent=/sys/fs/cgroup$(awk -F: '$1=="0"{print $3}' /proc/self/cgroup)
  cg=$parent/dg-mem-$$
  mkdir "$cg" && echo $((mb << 20)) >"$cg/memory.max" && echo 0 >"$cg/memory.swap.max" 2>/dev/null
else
  parent=/sys/fs/cgroup/memory$(awk -F: '$2=="memory"{print $3}' /proc/self/cgroup)
  cg=$parent/dg-mem-$$
  mkdir "$cg" && echo $((mb << 20)) >"$cg/memory.limit_in_bytes"
fi || { echo "memlimit.sh: cannot create a memory cgroup under $parent" >&2; exit 125; }
echo $$ >"$cg/cgroup.procs"
[ -n "${MEMLIMIT_CG_FILE:-}" ] && echo "$cg" >"$MEMLIMIT_CG_FILE"
exec "$@"
