#!/usr/bin/env bash
# A Docker engine for the compose cluster, on machines where none runs (CI, fresh boxes).
#
#   dockerd.sh start   print the DOCKER_HOST to use. If an engine already answers (DOCKER_HOST
#                      or /var/run/docker.sock) it is used and left alone; otherwise a private
#                      dockerd is started with its own data root, exec root and socket under
#                      $SKIFF_DOCKER_DIR (default /var/lib/skiff-docker), after recording what
#                      the host looked like (docker0, iptables chains, FORWARD policy, sysctls).
#   dockerd.sh stop    stop the private dockerd by PID (if this script started one) and remove
#                      only what it created: docker0 and br-* bridges, the DOCKER* iptables
#                      chains and their jump rules, the FORWARD policy and sysctls it changed.
#                      The image store stays under $SKIFF_DOCKER_DIR/data as a cache.
#   dockerd.sh purge   stop, then delete $SKIFF_DOCKER_DIR (every cached image).
#   dockerd.sh status  say which engine would be used.
#   dockerd.sh host    print the DOCKER_HOST of an engine that answers now; start none.
#
# Needs root and Debian's docker.io (dockerd, containerd, runc, docker-init) and iptables.
set -euo pipefail

DIR=${SKIFF_DOCKER_DIR:-/var/lib/skiff-docker}
SOCK="$DIR/docker.sock"
PIDFILE="$DIR/dockerd.pid"
STATE="$DIR/host-state"
LOG="$DIR/dockerd.log"
OWN_HOST="unix://$SOCK"

die() { echo "dockerd.sh: $*" >&2; exit 1; }
say() { echo "dockerd.sh: $*" >&2; }

engine_answers() {  # $1: DOCKER_HOST value ("" = the client's default)
  if [ -n "$1" ]; then
    DOCKER_HOST="$1" timeout 10 docker version --format '{{.Server.Version}}' >/dev/null 2>&1
  else
    (unset DOCKER_HOST; timeout 10 docker version --format '{{.Server.Version}}' >/dev/null 2>&1)
  fi
}

own_pid() {  # prints the PID of the dockerd this script started, if it still runs
  [ -f "$PIDFILE" ] || return 1
  local pid
  pid=$(cat "$PIDFILE")
  [ -n "$pid" ] && [ -d "/proc/$pid" ] && grep -q dockerd "/proc/$pid/comm" 2>/dev/null \
    && echo "$pid"
}

iptables_chains() {  # "table chain" for every DOCKER* chain present now
  local t
  for t in filter nat; do
    iptables -t "$t" -S 2>/dev/null | awk -v t="$t" '$1 == "-N" && $2 ~ /^DOCKER/ {print t, $2}'
  done
}

nft_tables() {  # "family:name" of every nftables table, if nft is installed
  command -v nft >/dev/null 2>&1 || return 0
  nft list tables 2>/dev/null | awk '$1 == "table" {print $2 ":" $3}' | tr '\n' ' '
}

record_host_state() {
  {
    # First: listing with iptables-nft creates the filter table where there was none.
    echo "nft_tables=$(nft_tables)"
    echo "forward_policy=$(iptables -S FORWARD 2>/dev/null | awk '$1 == "-P" {print $3}')"
    echo "ip_forward=$(cat /proc/sys/net/ipv4/ip_forward)"
    if [ -f /proc/sys/net/bridge/bridge-nf-call-iptables ]; then
      echo "bridge_nf=$(cat /proc/sys/net/bridge/bridge-nf-call-iptables)"
    fi
    echo "links=$(ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 | tr '\n' ' ')"
    echo "chains=$(iptables_chains | tr ' ' ':' | tr '\n' ' ')"
  } >"$STATE"
}

state_value() { sed -n "s/^$1=//p" "$STATE" 2>/dev/null; }

start() {
  if [ -n "${DOCKER_HOST:-}" ] && [ "$DOCKER_HOST" != "$OWN_HOST" ]; then
    engine_answers "$DOCKER_HOST" || die "DOCKER_HOST=$DOCKER_HOST does not answer; unset it \
to let this script start a private engine, or start that engine"
    say "using the running engine at $DOCKER_HOST"
    echo "$DOCKER_HOST"
    return
  fi
  if [ -S /var/run/docker.sock ] && engine_answers "unix:///var/run/docker.sock"; then
    say "using the running engine at /var/run/docker.sock"
    echo "unix:///var/run/docker.sock"
    return
  fi
  if own_pid >/dev/null && engine_answers "$OWN_HOST"; then
    say "private dockerd already running (pid $(own_pid)) at $OWN_HOST"
    echo "$OWN_HOST"
    return
  fi
  [ "$(id -u)" = 0 ] || die "no Docker engine answers and starting one needs root; run as root \
or start Docker yourself"
  local bin
  for bin in dockerd containerd runc docker-init iptables docker; do
    command -v "$bin" >/dev/null 2>&1 \
      || die "$bin not found; install Debian's packages: apt-get install docker.io iptables"
  done
  mkdir -p "$DIR/data" "$DIR/exec"
  # A state file left by a run that never stopped describes the host before that run: keep
  # it, so the next stop still removes what that run created.
  [ -f "$STATE" ] || record_host_state
  say "starting a private dockerd (data root $DIR/data, log $LOG)"
  # setsid: the daemon outlives this script and is not in the caller's process group.
  setsid dockerd \
    --host "$OWN_HOST" \
    --data-root "$DIR/data" \
    --exec-root "$DIR/exec" \
    --pidfile "$PIDFILE" \
    --exec-opt native.cgroupdriver=cgroupfs \
    --storage-driver overlay2 \
    --group root \
    >"$LOG" 2>&1 </dev/null &
  local i
  for i in $(seq 1 120); do
    if engine_answers "$OWN_HOST"; then
      say "private dockerd ready (pid $(cat "$PIDFILE"))"
      echo "$OWN_HOST"
      return
    fi
    if ! own_pid >/dev/null && [ "$i" -gt 10 ]; then
      break
    fi
    sleep 0.5
  done
  tail -20 "$LOG" >&2 || true
  stop >/dev/null 2>&1 || true
  die "the private dockerd did not come up; its log is above (full log: $LOG)"
}

remove_iptables_leftovers() {
  local before t chain rule
  before=" $(state_value chains) "
  # Jump rules from built-in chains into chains dockerd created, then those chains.
  for t in filter nat; do
    iptables -t "$t" -S 2>/dev/null | awk '$1 == "-A" && $2 !~ /^DOCKER/' | while read -r rule; do
      for chain in $(iptables_chains | awk -v t="$t" '$1 == t {print $2}'); do
        case "$before" in *" $t:$chain "*) continue ;; esac
        if [[ " $rule " == *" -j $chain "* ]] || [[ " $rule " == *" docker0 "* ]]; then
          # shellcheck disable=SC2086  # a saved rule is a word list by design
          iptables -t "$t" ${rule/-A/-D} 2>/dev/null || true
          break
        fi
      done
    done
  done
  # The MASQUERADE rules for the bridges (they jump to no DOCKER chain).
  iptables -t nat -S POSTROUTING 2>/dev/null \
    | awk '$1 == "-A" && /MASQUERADE/ && (/ ! -o docker0 / || / ! -o br-/)' \
    | while read -r rule; do
        # shellcheck disable=SC2086
        iptables -t nat ${rule/-A/-D} 2>/dev/null || true
      done
  iptables_chains | while read -r t chain; do
    case "$before" in *" $t:$chain "*) continue ;; esac
    iptables -t "$t" -F "$chain" 2>/dev/null || true
  done
  iptables_chains | while read -r t chain; do
    case "$before" in *" $t:$chain "*) continue ;; esac
    iptables -t "$t" -X "$chain" 2>/dev/null || say "could not delete iptables chain $t/$chain"
  done
  local policy
  policy=$(state_value forward_policy)
  if [ -n "$policy" ]; then
    iptables -P FORWARD "$policy"
  fi
  # Tables that only exist because iptables was used, now empty again: remove them.
  local before_tables table
  before_tables=" $(state_value nft_tables) "
  if command -v nft >/dev/null 2>&1; then
    for table in filter nat; do
      case "$before_tables" in *" ip:$table "*) continue ;; esac
      nft list table ip "$table" >/dev/null 2>&1 || continue
      if ! iptables -t "$table" -S | grep -q -v -E '^-P [A-Z]+ ACCEPT$'; then
        nft delete table ip "$table" || say "could not delete the empty nftables table ip $table"
      fi
    done
  fi
}

stop() {
  local pid
  if ! [ -f "$STATE" ]; then
    say "no private dockerd was started here ($STATE missing); nothing to stop"
    return
  fi
  if pid=$(own_pid); then
    say "stopping the private dockerd (pid $pid)"
    kill -TERM "$pid"
    local i
    for i in $(seq 1 60); do
      [ -d "/proc/$pid" ] || break
      sleep 0.5
    done
    if [ -d "/proc/$pid" ]; then
      say "dockerd $pid did not stop in 30s; killing it"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  # Its managed containerd normally exits with it; one left behind is ours (its pid file is).
  local cpid
  cpid=$(cat "$DIR/exec/containerd/containerd.pid" 2>/dev/null || true)
  if [ -n "$cpid" ] && [ -d "/proc/$cpid" ] && grep -q containerd "/proc/$cpid/comm"; then
    kill -TERM "$cpid" 2>/dev/null || true
    sleep 1
  fi
  # Mounts left under our roots (containers killed with the daemon).
  awk -v d="$DIR/" 'index($2, d) == 1 {print $2}' /proc/mounts | sort -r | while read -r m; do
    umount -l "$m" 2>/dev/null || true
  done
  local before link
  before=" $(state_value links) "
  for link in $(ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1); do
    case "$link" in docker0 | br-*) ;; *) continue ;; esac
    case "$before" in *" $link "*) continue ;; esac
    ip link delete "$link" 2>/dev/null || say "could not delete link $link"
  done
  remove_iptables_leftovers
  local v
  v=$(state_value ip_forward)
  [ -z "$v" ] || echo "$v" >/proc/sys/net/ipv4/ip_forward
  v=$(state_value bridge_nf)
  if [ -n "$v" ] && [ -f /proc/sys/net/bridge/bridge-nf-call-iptables ]; then
    echo "$v" >/proc/sys/net/bridge/bridge-nf-call-iptables
  fi
  rm -f "$STATE" "$PIDFILE" "$SOCK"
  say "stopped; host network state restored"
}

status() {
  if own_pid >/dev/null; then
    echo "private dockerd running (pid $(own_pid)) at $OWN_HOST"
  elif [ -S /var/run/docker.sock ] && engine_answers "unix:///var/run/docker.sock"; then
    echo "a system engine answers at /var/run/docker.sock"
  else
    echo "no engine running"
  fi
}

host() {
  if [ -n "${DOCKER_HOST:-}" ] && engine_answers "$DOCKER_HOST"; then
    echo "$DOCKER_HOST"
  elif [ -S /var/run/docker.sock ] && engine_answers "unix:///var/run/docker.sock"; then
    echo "unix:///var/run/docker.sock"
  elif own_pid >/dev/null && engine_answers "$OWN_HOST"; then
    echo "$OWN_HOST"
  else
    die "no Docker engine answers; start one with: $0 start"
  fi
}

case "${1:-}" in
  start) start ;;
  host) host ;;
  stop) stop ;;
  purge) stop; rm -rf "$DIR"; say "removed $DIR" ;;
  status) status ;;
  *) die "usage: dockerd.sh start|stop|purge|status|host" ;;
esac
