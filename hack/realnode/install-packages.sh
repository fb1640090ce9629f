#!/usr/bin/env bash
# Installs the Debian packages the real single-node cluster needs (make
# node-packages): the container runtime (containerd + runc), the CNI
# plugins (bridge, host-local, portmap, loopback), iptables and conntrack
# for kube-proxy, and mmdebstrap for the trainer image's root filesystem.
# Uses the machine's own apt sources; installs only what is missing.
set -euo pipefail

packages=(containerd runc containernetworking-plugins iptables conntrack mmdebstrap)

missing=()
for p in "${packages[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
		missing+=("$p")
	fi
done
if [ "${#missing[@]}" -eq 0 ]; then
	echo "node packages: all installed (${packages[*]})"
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "node packages: missing ${missing[*]}; run as root to install them" >&2
	exit 1
fi
echo "node packages: installing ${missing[*]} with apt-get"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# --no-install-recommends: containerd recommends nothing the node needs, and
# nothing here may start a service of its own (see policy-rc.d below).
# Debian starts containerd.service on install where systemd runs; the
# harness runs its own containerd with its own socket and state, so a
# policy-rc.d refusing service starts keeps the packaged one stopped.
policy=/usr/sbin/policy-rc.d
created_policy=0
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\nexit 101\n' > "$policy"
	chmod 755 "$policy"
	created_policy=1
fi
trap '[ "$created_policy" = 1 ] && rm -f "$policy"' EXIT
apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "node packages: installed ${missing[*]}"
