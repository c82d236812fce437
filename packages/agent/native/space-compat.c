/*
 * space-compat.so: preloaded into every dynamically linked program of a sandbox (through
 * /etc/ld.so.preload, written into new volumes of glibc templates) to paper over gaps of the gVisor
 * release this platform runs on, without touching the template's files.
 *
 * statx: this gVisor answers EINVAL when the flags include AT_NO_AUTOMOUNT (later releases ignore
 * it: there are no automounts in a sandbox). GNU coreutils 9 passes it on every call, so `ls`,
 * `stat` and `cp -a` failed with "Invalid argument" on every path. The flag is dropped here.
 *
 * close_range: this gVisor answers EINVAL when `last` is above INT_MAX (it takes it for a signed
 * int). Callers pass ~0U for "every descriptor from `first` on": GLib's g_spawn does, so XFCE's
 * session could start none of its programs ("Failed to close file descriptor for child process").
 * No descriptor is above INT_MAX: `last` is clamped.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <sys/syscall.h>
#include <unistd.h>

struct statx;

int statx(int dirfd, const char *path, int flags, unsigned int mask, struct statx *buf) {
  return (int)syscall(SYS_statx, dirfd, path, flags & ~AT_NO_AUTOMOUNT, mask, buf);
}

int close_range(unsigned int first, unsigned int last, int flags) {
  return (int)syscall(SYS_close_range, first, last > INT_MAX ? (unsigned int)INT_MAX : last, flags);
}
