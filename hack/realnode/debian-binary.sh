#!/usr/bin/env bash
# Copies one program out of a Debian package into bin/ without installing
# the package (make node-tools: the registry):
#
#   hack/realnode/debian-binary.sh PACKAGE PATH-IN-PACKAGE OUT
#
# The package comes from the machine's own apt sources (`apt-get download`,
# no mirror named) and is unpacked with `dpkg-deb -x` into a temporary
# directory. Nothing is installed: installing Debian's docker-registry
# would enable a system service that listens on every interface at the next
# boot, and the real node runs its own registry on 127.0.0.1. The package's version is
# printed and written beside the binary (OUT.version).
set -euo pipefail
pkg=$1 path=$2 out=$3

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
# apt-get download reads the package lists; a fresh machine has none yet.
if ! apt-cache show "$pkg" >/dev/null 2>&1; then
  apt-get update -qq
fi
# As root, apt drops to the _apt user for downloads, which cannot write
# here; download unsandboxed instead (the file is ours, in our directory).
apt-get download -qq -o APT::Sandbox::User=root "$pkg"
deb=$(ls ./*.deb)
version=$(dpkg-deb -f "$deb" Version)
dpkg-deb -x "$deb" root
if [ ! -f "root/$path" ]; then
  echo "$pkg $version has no $path" >&2
  exit 1
fi
mkdir -p "$(dirname "$out")"
install -m 0755 "root/$path" "$out"
echo "$version" > "$out.version"
echo "$pkg $version: $path -> $out"
