#!/usr/bin/env bash
# Builds the kvserve image with podman, buildah or docker (first found; CONTAINER_ENGINE
# overrides). Where no base image is present it makes one with debootstrap from the apt
# mirror, so no registry is needed.
#   deploy/build-image.sh                      full build from source  -> kvserve:latest
#   deploy/build-image.sh --prebuilt build     runtime from host binaries (fast; CI)
#   deploy/build-image.sh --cuda               CUDA backend             -> kvserve:cuda
#   ... --stack                                also kvserve-prometheus and kvserve-nginx (compose)
# Options: --tag NAME, --model GGUF (with --prebuilt; default models/<default>.gguf if present).
# Env: KVSERVE_BASE / KVSERVE_RUNTIME_BASE (base images), MIRROR (debootstrap mirror),
# KVSERVE_BUILD_OPTS (more build flags, e.g. --no-cache).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
prebuilt="" cuda=0 tag="" model="" stack=0
while [ $# -gt 0 ]; do
  case "$1" in
    --prebuilt) prebuilt=$(cd "$2" && pwd); shift 2 ;;
    --cuda) cuda=1; shift ;;
    --stack) stack=1; shift ;;
    --tag) tag=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    *) sed -n '2,12p' "$0" >&2; exit 2 ;;
  esac
done
engine=${CONTAINER_ENGINE:-}
if [ -z "$engine" ]; then
  for e in podman buildah docker; do command -v "$e" >/dev/null && { engine=$e; break; }; done
fi
[ -n "$engine" ] || { echo "build-image: need podman, buildah or docker" >&2; exit 1; }
# podman/buildah: this project's settings, not the system's /etc/containers.
export CONTAINERS_CONF=${CONTAINERS_CONF:-$root/deploy/containers.conf}

exists() { case "$engine" in buildah) buildah inspect --type image "$1" >/dev/null 2>&1 ;;
                                     *) "$engine" image inspect "$1" >/dev/null 2>&1 ;; esac; }

# A Debian bookworm base made locally: debootstrap minbase (~1-3 min), imported as an image.
local_base=localhost/kvserve-debian:bookworm
make_base() {
  exists "$local_base" && return
  command -v debootstrap >/dev/null || { echo "build-image: no base image and no debootstrap" >&2; exit 1; }
  local mirror=${MIRROR:-$(grep -hoE 'https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list \
                      /etc/apt/sources.list.d/* 2>/dev/null | head -1 | tr -d ' ')}
  mirror=${mirror:-http://deb.debian.org/debian}
  local rootfs; rootfs=$(mktemp -d /var/tmp/kvserve-rootfs.XXXXXX)
  echo "build-image: debootstrap bookworm from $mirror"
  # One retry: a mirror hiccup should not fail CI.
  debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$rootfs.log" 2>&1 \
    || { rm -rf "$rootfs"; mkdir "$rootfs"; debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$rootfs.log" 2>&1; } \
    || { tail -20 "$rootfs.log" >&2; exit 1; }
  # debootstrap lists only "bookworm main"; images also need point and security updates.
  printf 'deb %s bookworm main\ndeb %s bookworm-updates main\ndeb %s-security bookworm-security main\n' \
    "$mirror" "$mirror" "${mirror%/}" > "$rootfs/etc/apt/sources.list"
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  case "$engine" in
    buildah) tar -C "$rootfs" -c . | podman import - "$local_base" 2>/dev/null \
               || { echo "build-image: buildah alone cannot import a tarball; install podman" >&2; exit 1; } ;;
    *) tar -C "$rootfs" -c . | "$engine" import - "$local_base" >/dev/null ;;
  esac
  rm -rf "$rootfs" "$rootfs.log"
}
base=${KVSERVE_BASE:-} runtime_base=${KVSERVE_RUNTIME_BASE:-}
if [ -z "$base" ]; then
  if exists docker.io/library/debian:bookworm || ! command -v debootstrap >/dev/null; then
    base=docker.io/library/debian:bookworm runtime_base=${runtime_base:-docker.io/library/debian:bookworm-slim}
  else
    make_base; base=$local_base
  fi
fi
runtime_base=${runtime_base:-$base}

args=(--build-arg "BASE=$base" --build-arg "RUNTIME_BASE=$runtime_base"
      --build-arg "VERSION=$(git -C "$root" describe --always --dirty 2>/dev/null || echo dev)"
      -f "$root/deploy/Containerfile")
case "$engine" in
  # chroot isolation: no daemon, no cgroups needed; docker format keeps HEALTHCHECK.
  podman) build=(podman build --isolation chroot --pull=never --format docker) ;;
  buildah) build=(buildah bud --isolation chroot --pull=never --format docker --layers) ;;
  docker) build=(docker build) ;;
esac
build+=(${KVSERVE_BUILD_OPTS:-})   # e.g. --no-cache
if [ -n "$prebuilt" ]; then
  stage=$(mktemp -d); trap 'rm -rf "$stage"' EXIT
  [ -n "$model" ] || { m=$root/models/SmolLM2-135M-Instruct.Q4_1.gguf; [ -f "$m" ] && model=$m; }
  "$root/deploy/stage-runtime.sh" "$stage" "$prebuilt/kvserve" "$prebuilt/kvctl" $model
  "${build[@]}" "${args[@]}" --target runtime-prebuilt -t "${tag:-kvserve:latest}" "$stage"
else
  # The model enters through the context (.containerignore lets it in): the host's network
  # set-up (proxies, CAs) works, a build container's may not.
  "$root/scripts/fetch-model.sh" >/dev/null
  target=runtime; [ "$cuda" = 1 ] && target=cuda
  "${build[@]}" "${args[@]}" --target "$target" -t "${tag:-kvserve:$([ "$cuda" = 1 ] && echo cuda || echo latest)}" "$root"
fi
if [ "$stack" = 1 ]; then
  for svc in prometheus nginx; do
    "${build[@]}" --build-arg "BASE=$runtime_base" -t "kvserve-$svc:latest" "$root/deploy/$svc"
  done
fi
echo "build-image: built ${tag:-kvserve:$([ "$cuda" = 1 ] && echo cuda || echo latest)} with $engine"
