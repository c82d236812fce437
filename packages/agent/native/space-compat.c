/*
 * space-compat.so: preloaded into every dynamically linked program of a sandbox (through
 * /etc/ld.so.preload, written into new volumes of glibc templates) to paper over gaps of the gVisor
 * release this platform runs on, without touching the template's files.
 *
 * statx: this gVisor answers EINVAL when the flags include AT_NO_AUTOMOUNT (later releases ignore
 * it: there are no automounts in a sandbox). GNU coreutils 9 passes it on every call, so `ls`,
 * `stat` and `cp -a` failed with "Invalid argument" on every path. The flag is dropped here.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

struct statx;

int statx(int dirfd, const char *path, int flags, unsigned int mask, struct statx *buf) {
  return (int)syscall(SYS_statx, dirfd, path, flags & ~AT_NO_AUTOMOUNT, mask, buf);
}
