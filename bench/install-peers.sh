#!/usr/bin/env bash
# install-peers.sh installs the lock services that `cd bench && go run ./compare`
# measures dlm against, from Debian packages: redis-server (redis, redlock),
# etcd-server (etcd) and zookeeper (zookeeper).
#
# The harness starts its own servers on loopback ports with temporary data
# directories, so the packages' system services are neither wanted nor
# started: a policy-rc.d that refuses every start is in place while apt runs,
# and any service that still came up is stopped afterwards. Running the script
# again is harmless: apt-get skips what is installed.
#
# Needs root (CI runs as root). Usage: bash bench/install-peers.sh
set -euo pipefail

packages=(redis-server etcd-server zookeeper)

need=()
for p in "${packages[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		need+=("$p")
	fi
done

if [ "${#need[@]}" -gt 0 ]; then
	policy=/usr/sbin/policy-rc.d
	backup=""
	if [ -e "$policy" ]; then
		backup=$(mktemp)
		cp -p "$policy" "$backup"
	fi
	restore() {
		if [ -n "$backup" ]; then
			mv -f "$backup" "$policy"
		else
			rm -f "$policy"
		fi
	}
	trap restore EXIT
	# Exit code 101 tells invoke-rc.d that the action is forbidden.
	printf '#!/bin/sh\nexit 101\n' >"$policy"
	chmod 755 "$policy"

	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${need[@]}"
	restore
	trap - EXIT
fi

# Stop whatever a service manager started anyway (a host with systemd may
# ignore policy-rc.d for socket-activated units); the harness wants the ports
# and the CPU to itself.
for svc in redis-server etcd zookeeper; do
	if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$svc" 2>/dev/null; then
		systemctl stop "$svc" || true
	elif command -v service >/dev/null 2>&1; then
		service "$svc" stop >/dev/null 2>&1 || true
	fi
done

echo "peers installed:"
redis-server --version
etcd --version | awk 'NR == 1' # reads it all: head could SIGPIPE etcd, fatal under pipefail
ls /usr/share/java/zookeeper.jar
java -version 2>&1 | awk 'NR == 1'
