#!/usr/bin/env bash
# What btrfs quotas cost under churn, on a scratch filesystem (a loop-mounted image in /tmp): 60
# snapshots of a template (a copy of /usr/lib/x86_64-linux-gnu), 1 MB written to each, all deleted,
# then 10 snapshots while btrfs's cleaner frees them. Prints one line per quota mode: none, full
# (what the node used before 2026-12-01) and simple (what it uses now; btrfs-progs 6.7 or later).
# Usage: bench/quota-modes.sh [none|full|simple ...]   (as root; ./space bench does not run it)
set -euo pipefail
work=$(mktemp -d /tmp/space-quota-modes.XXXXXX)
trap 'umount "$work/mnt" 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir "$work/mnt"
ms() { echo $((($(date +%s%N) - $1) / 1000000)); }

for mode in "${@:-none full simple}"; do
  for m in $mode; do
    truncate -s 20G "$work/image" && mkfs.btrfs -q -f "$work/image" >/dev/null 2>&1
    mount -o loop,noatime,compress=zstd:1 "$work/image" "$work/mnt"
    case $m in full) btrfs quota enable "$work/mnt" ;; simple) btrfs quota enable --simple "$work/mnt" ;; esac
    sysfs=/sys/fs/btrfs/$(btrfs filesystem show "$work/mnt" | grep -o 'uuid: \S*' | cut -d' ' -f2)
    btrfs subvolume create "$work/mnt/template" >/dev/null
    cp -a /usr/lib/x86_64-linux-gnu "$work/mnt/template/"
    btrfs property set -ts "$work/mnt/template" ro true && sync
    t=$(date +%s%N)
    for i in $(seq 60); do btrfs subvolume snapshot "$work/mnt/template" "$work/mnt/v$i" >/dev/null; done
    snapshots=$(ms "$t")
    for i in $(seq 60); do head -c 1000000 /dev/urandom >"$work/mnt/v$i/written"; done && sync
    for i in $(seq 60); do btrfs subvolume delete "$work/mnt/v$i" >/dev/null; done
    t=$(date +%s%N)
    for i in $(seq 10); do btrfs subvolume snapshot "$work/mnt/template" "$work/mnt/w$i" >/dev/null; done
    while_cleaning=$(($(ms "$t") / 10))
    t=$(date +%s%N)
    btrfs subvolume sync "$work/mnt" >/dev/null
    cleaner=$(ms "$t")
    commits=$(awk '/^total_commit_ms/ {t=$2} /^max_commit_ms/ {m=$2} END {print t " ms total, longest " m " ms"}' "$sysfs/commit_stats")
    echo "quotas $m: 60 snapshots $snapshots ms; one snapshot while cleaning $while_cleaning ms; cleaner done after $cleaner ms; commits $commits"
    umount "$work/mnt"
  done
done
