#!/usr/bin/env bash
# Installs what deploy/build-image.sh and deploy/check.sh need on Debian 12 (root or sudo):
# podman, buildah, runc, netavark/aardvark-dns (container DNS) with iptables (netavark sets
# up container networks through it: without it `compose up` fails "netavark: No such file or
# directory"), debootstrap, and a
# venv with pinned PyPI tools: podman-compose (Debian's 1.0.3 has no --profile),
# kubernetes-validate, yamllint. Prints the venv's bin folder.
set -euo pipefail
pkgs=(podman buildah runc netavark aardvark-dns iptables debootstrap uidmap python3-venv prometheus curl)
# kubectl (kustomize v5 built in) comes from the Kubernetes/Cloud SDK apt repository where the
# machine has one; Debian's own kubernetes-client (1.20) bundles a kustomize too old for
# deploy/k8s, so it is not a substitute.
command -v kubectl >/dev/null || ! apt-cache policy kubectl 2>/dev/null | grep -q 'Candidate: [0-9]' || pkgs+=(kubectl)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "deploy/setup: installing ${missing[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
venv=${KVSERVE_DEPLOY_VENV:-/var/tmp/kvserve-deploy-venv}
want="podman-compose==1.2.0 kubernetes-validate==1.34.1 yamllint==1.35.1"
if [ "$(cat "$venv/.want" 2>/dev/null)" != "$want" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check $want >&2
  echo "$want" > "$venv/.want"
fi
echo "$venv/bin"
