#!/usr/bin/env bash
# What a btrfs snapshot costs right after a large write, on a scratch filesystem (a loop-mounted
# image in /tmp, set up like the node's volume: zstd, commit=1, simple quotas): 500 MB of random data
# written, then a read-only snapshot at once, and one after 3 s idle; three rounds per setting.
# Settings: the loop device buffered (the host's page cache holds the image file's dirty pages too)
# or direct, and the volume's dirty-data bound in MB (0: the kernel's defaults).
# Usage: bench/loop-writeback.sh [off|on:MB ...]   (as root; default: off:0 off:16 on:0 on:16)
set -euo pipefail
work=$(mktemp -d /tmp/space-loop-writeback.XXXXXX)
loop=
cleanup() {
  umount "$work/mnt" 2>/dev/null || true
  [ -n "$loop" ] && losetup -d "$loop" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
mkdir "$work/mnt"
head -c 500M /dev/urandom >"$work/random"
ms() { echo $((($(date +%s%N) - $1) / 1000000)); }

for setting in "${@:-off:0 off:16 on:0 on:16}"; do
  for s in $setting; do
    direct=${s%%:*} dirty=${s##*:}
    rm -f "$work/image" && truncate -s 20G "$work/image" && mkfs.btrfs -q -f "$work/image" >/dev/null
    loop=$(losetup -f --show --direct-io="$direct" "$work/image")
    mount -o noatime,compress=zstd:1,commit=1 "$loop" "$work/mnt"
    btrfs quota enable --simple "$work/mnt"
    bdi=/sys/fs/btrfs/$(btrfs filesystem show "$work/mnt" | grep -o 'uuid: \S*' | cut -d' ' -f2)/bdi
    if [ "$dirty" -gt 0 ]; then echo 1 >"$bdi/strict_limit" && echo $((dirty * 1048576)) >"$bdi/max_bytes"; fi
    btrfs subvolume create "$work/mnt/s" >/dev/null && sync
    for round in 1 2 3; do
      t=$(date +%s%N) && cat "$work/random" >"$work/mnt/s/f$round" && written=$(ms "$t")
      t=$(date +%s%N) && btrfs subvolume snapshot -r "$work/mnt/s" "$work/mnt/after$round" >/dev/null && after=$(ms "$t")
      sleep 3
      t=$(date +%s%N) && btrfs subvolume snapshot -r "$work/mnt/s" "$work/mnt/idle$round" >/dev/null && idle=$(ms "$t")
      echo "direct I/O $direct, dirty bound ${dirty} MB: 500 MB written in $written ms; snapshot right after $after ms; after 3 s idle $idle ms"
    done
    umount "$work/mnt" && losetup -d "$loop" && loop=
  done
done
