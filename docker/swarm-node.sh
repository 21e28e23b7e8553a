# Sourced by docker/test-swarm.sh and docker/bench-swarm.sh: puts this engine in a swarm for
# the run and takes it out again only if the run put it there.
#
#   swarm_enter      # joins a single-node swarm when the engine is in none (sets swarm_joined=1)
#   swarm_restore    # leaves it (and removes the docker_gwbridge it made) when we joined
#
# A machine already in a swarm is used as found (it must be a manager).

swarm_joined=0
swarm_had_gwbridge=1

swarm_enter() {
  local state addr
  state=$(docker info --format '{{.Swarm.LocalNodeState}}')
  swarm_had_gwbridge=0
  docker network inspect docker_gwbridge >/dev/null 2>&1 && swarm_had_gwbridge=1
  case $state in
    inactive)
      # The first global IPv4 address that is not a container bridge: `swarm init` refuses
      # to guess when the host has several.
      addr=$(ip -4 -o addr show scope global 2>/dev/null |
        awk '$2 != "docker0" && $2 !~ /^(br-|veth|docker_gwbridge)/ {sub(/\/.*/, "", $4); print $4; exit}')
      docker swarm init ${addr:+--advertise-addr "$addr"} >/dev/null
      swarm_joined=1
      echo "swarm: joined a single-node swarm (advertise ${addr:-default}); will leave it"
      ;;
    active)
      if [ "$(docker info --format '{{.Swarm.ControlAvailable}}')" != true ]; then
        echo "swarm: this node is a swarm worker; run on a manager" >&2
        return 1
      fi
      echo "swarm: the engine is already in a swarm; using it as found"
      ;;
    *)
      echo "swarm: swarm state is $state; expected inactive or active" >&2
      return 1
      ;;
  esac
}

swarm_restore() {
  [ "$swarm_joined" = 1 ] || return 0
  docker swarm leave --force >/dev/null 2>&1 || { echo "swarm: FAIL leaving the swarm we joined" >&2; return 1; }
  # `swarm init` made the bridge overlay networks leave the host by; it was not there before.
  [ "$swarm_had_gwbridge" = 1 ] || docker network rm docker_gwbridge >/dev/null 2>&1
  swarm_joined=0
}

# Removes stack $1 and waits until its containers, networks and volumes are gone; prints
# what is left behind (nothing on success).
stack_remove() {
  local stack=$1
  docker stack rm "$stack" >/dev/null 2>&1
  for _ in $(seq 1 120); do
    [ -z "$(docker ps -aq --filter "label=com.docker.stack.namespace=$stack")" ] && break
    sleep 0.5
  done
  for _ in $(seq 1 40); do
    docker volume rm "${stack}_state" "${stack}_skills" "${stack}_executor-scratch" >/dev/null 2>&1
    [ -z "$(docker network ls -q --filter "label=com.docker.stack.namespace=$stack")$(docker volume ls -q --filter "name=${stack}_")" ] && break
    sleep 0.5
  done
  docker ps -aq --filter "label=com.docker.stack.namespace=$stack"
  docker network ls -q --filter "label=com.docker.stack.namespace=$stack"
  docker volume ls -q --filter "name=${stack}_"
  docker secret ls -q --filter "label=com.docker.stack.namespace=$stack" 2>/dev/null
  docker config ls -q --filter "label=com.docker.stack.namespace=$stack" 2>/dev/null
}
