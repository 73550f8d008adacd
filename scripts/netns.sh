#!/usr/bin/env bash
# Run a command inside a private network namespace with one interface (10.99.0.1/24) and a
# default route, as Chromium's WebRTC needs: it gathers no candidates on loopback alone.
# Made and removed by this script; needs root (CI runs as root).
set -euo pipefail
ns="tessera-e2e-$$"
cleanup() { ip netns del "$ns" 2>/dev/null || true; }
trap cleanup EXIT
ip netns add "$ns"
ip netns exec "$ns" ip link set lo up
ip netns exec "$ns" ip link add va type veth peer name vb
ip netns exec "$ns" ip addr add 10.99.0.1/24 dev va
ip netns exec "$ns" ip link set va up
ip netns exec "$ns" ip link set vb up
ip netns exec "$ns" ip route add default via 10.99.0.2 dev va
TESSERA_E2E_MEDIA_IP=10.99.0.1 ip netns exec "$ns" "$@"
