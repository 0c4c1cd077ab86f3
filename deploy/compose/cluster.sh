#!/usr/bin/env bash
# Bring the compose cluster up or down in one step: engine, wheelhouse, image, compose.
#
#   cluster.sh up [--offline]   start (or reuse) a Docker engine, build the wheelhouse and the
#                               image, `compose up -d`, wait until every service is healthy
#   cluster.sh down             `compose down -v`, then stop the private engine if one runs
#   cluster.sh up --ha          the HA profile (compose.ha.yaml: 3 etcd members, 2 apiservers,
#                               2 schedulers, 2 controller-managers); SKIFF_HA=1 does the same,
#                               and `SKIFF_HA=1 cluster.sh down` tears it down
#
# --offline (or SKIFF_BASE_IMAGE=...) builds on the debootstrap base of build-base-image.sh
# instead of pulling python:3.11-slim. The project is $COMPOSE_PROJECT_NAME (default skiff),
# the apiserver is published on 127.0.0.1:$SKIFF_API_PORT (default 6443), and
# COMPOSE_PROFILES=tracing SKIFF_OTLP_ENDPOINT=http://jaeger:4317 adds Jaeger. The fence
# agent gets the socket of the engine DOCKER_HOST names (SKIFF_DOCKER_SOCKET).
#
# TLS (issue 14): compose's one-shot `pki` service makes the CA, every control-plane
# component's certificate, the admin's kubeconfig and the nodes' bootstrap token (join/) in
# $SKIFF_PKI_DIR (default deploy/compose/pki), owned by you; `up` prints how to use them.
# `down` keeps them (`rm -r` them for new ones). The nodes join with that token as kubeadm's
# do (`skiff join`, SPEC JN3) and get their certificates by CSR (`kubectl get csr`); what
# they got lives in their volumes, which `down` removes (-v) with etcd's data.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
export COMPOSE_PROJECT_NAME=${COMPOSE_PROJECT_NAME:-skiff}
export SKIFF_IMAGE=${SKIFF_IMAGE:-skiff:latest}

die() { echo "cluster.sh: $*" >&2; exit 1; }
say() { echo "cluster.sh: $*" >&2; }

compose() {
  local files=(-f "$here/compose.yaml")
  [ "${SKIFF_HA:-0}" = 1 ] && files+=(-f "$here/compose.ha.yaml")
  if docker compose version >/dev/null 2>&1; then
    docker compose "${files[@]}" "$@"
  elif command -v docker-compose >/dev/null 2>&1; then
    docker-compose "${files[@]}" "$@"
  else
    die "neither 'docker compose' nor 'docker-compose' is installed; apt-get install docker-compose"
  fi
}

docker_socket() {  # the fence agent mounts the engine's socket: the one DOCKER_HOST names
  case "$DOCKER_HOST" in
    unix://*) export SKIFF_DOCKER_SOCKET=${SKIFF_DOCKER_SOCKET:-${DOCKER_HOST#unix://}} ;;
    *) say "DOCKER_HOST=$DOCKER_HOST is not a unix socket: the fence agent gets" \
         "${SKIFF_DOCKER_SOCKET:-/var/run/docker.sock}; set SKIFF_DOCKER_SOCKET if that is wrong" ;;
  esac
}

up() {
  local offline=0 arg
  for arg in "$@"; do
    case "$arg" in
      --offline) offline=1 ;;
      --ha) export SKIFF_HA=1 ;;
      *) die "unknown option $arg; usage: cluster.sh up [--offline] [--ha]" ;;
    esac
  done
  DOCKER_HOST=$("$here/dockerd.sh" start)
  export DOCKER_HOST
  docker_socket
  export SKIFF_PKI_DIR=${SKIFF_PKI_DIR:-$here/pki}
  export SKIFF_PKI_USER=${SKIFF_PKI_USER:-$(id -u):$(id -g)}
  mkdir -p "$SKIFF_PKI_DIR"  # yours, before docker would make it root's
  local base=${SKIFF_BASE_IMAGE:-}
  if [ -z "$base" ] && [ "$offline" = 1 ]; then
    base=skiff-base:bookworm
  fi
  if [ -n "$base" ]; then
    "$here/build-base-image.sh" "$base"
  fi
  "$here/build-wheelhouse.sh" "$here/wheelhouse"
  docker build --quiet --build-arg "BASE_IMAGE=${base:-python:3.11-slim}" -t "$SKIFF_IMAGE" \
    "$here" >/dev/null
  compose up -d --no-build
  local label="label=com.docker.compose.project=$COMPOSE_PROJECT_NAME" waiting states failed
  local deadline=$((SECONDS + 180))
  while true; do
    # One `docker inspect` of every container of the project: name, health (or state) and
    # exit code. A one-shot service (the `pki` one) is done once it exited 0, as compose's
    # `service_completed_successfully` has it; one that exited non-zero fails the start now.
    # shellcheck disable=SC2046  # one argument per container id
    states=$(docker inspect -f '{{.Name}} {{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}} {{.State.ExitCode}}' \
      $(docker ps -aq --filter "$label"))
    failed=$(awk '$2 == "exited" && $3 != 0 {print substr($1, 2)}' <<<"$states")
    if [ -n "$failed" ]; then
      for name in $failed; do docker logs --tail 40 "$name" >&2 || true; done
      die "failed to start:" $failed "(exited non-zero; its log is above)"
    fi
    waiting=$(awk '$2 != "healthy" && !($2 == "exited" && $3 == 0) {printf " %s(%s)", substr($1, 2), $2}' <<<"$states")
    if [ -z "$waiting" ]; then
      local pki=$SKIFF_PKI_DIR
      say "cluster up (TLS); export DOCKER_HOST=$DOCKER_HOST"
      say "the nodes joined with the bootstrap token in $pki/join (kubectl get csr)"
      say "kubectl --kubeconfig $pki/kubeconfig get nodes     # HTTPS, admin (system:masters)"
      say "export SKIFF_CA_FILE=$pki/admin/ca.crt SKIFF_CLIENT_CERT_FILE=$pki/admin/client.crt" \
        "SKIFF_CLIENT_KEY_FILE=$pki/admin/client.key; skiff --server" \
        "127.0.0.1:${SKIFF_API_PORT:-6443} get nodes"
      return
    fi
    [ "$SECONDS" -lt "$deadline" ] || die "not healthy after 3 minutes:$waiting; see: \
docker compose -p $COMPOSE_PROJECT_NAME logs"
    sleep 2
  done
}

down() {
  DOCKER_HOST=$("$here/dockerd.sh" host)
  export DOCKER_HOST
  docker_socket
  compose --profile tracing down -v --remove-orphans
  "$here/dockerd.sh" stop
}

case "${1:-}" in
  up) shift; up "$@" ;;
  down) down ;;
  *) die "usage: cluster.sh up [--offline] [--ha] | down" ;;
esac
