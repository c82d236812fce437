/*
 * space-init: PID 1 of every sandbox. Starts the daemon, reaps every orphaned process (Node.js only
 * waits for its own children, so without this zombies would pile up against the pid limit), forwards
 * SIGTERM/SIGINT to the daemon, and SIGUSR2 (the node agent's "listen again" after a checkpoint or a
 * restore: the runtime can signal a container's init even when a restored process keeps the id of the
 * container it was checkpointed in), and SIGCONT (the node's remedy for a daemon stopped by a process
 * in the sandbox: SIGSTOP, which no process can ignore), and exits with the daemon's status.
 *
 * It alone keeps CAP_SYS_ADMIN (the daemon and everything it starts run without it), for one use:
 * on SIGUSR1 it sets the hostname written to /run/space/hostname. A sandbox restored from a memory
 * image keeps the image's hostname, so a clone bound to a new session (a fork, or a sandbox restored
 * from a template's image) is renamed this way by its daemon.
 * Usage: space-init ARGV...
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define HOSTNAME_FILE "/run/space/hostname"

static volatile pid_t child = 0;

static void forward(int sig) {
  if (child > 0) kill(child, sig);
}

/* Only async-signal-safe calls: open, read, close, sethostname. */
static void set_hostname(int sig) {
  (void)sig;
  char name[65];
  int fd = open(HOSTNAME_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t n = read(fd, name, sizeof(name) - 1);
  close(fd);
  if (n <= 0) return;
  while (n > 0 && (name[n - 1] == '\n' || name[n - 1] == ' ')) n--;
  if (n > 0) sethostname(name, (size_t)n);
}

/* Removes CAP_SYS_ADMIN from this process for good (bounding, effective, permitted, inheritable). */
static int drop_sys_admin(void) {
  struct __user_cap_header_struct header = { _LINUX_CAPABILITY_VERSION_3, 0 };
  struct __user_cap_data_struct data[2];
  if (prctl(PR_CAPBSET_DROP, CAP_SYS_ADMIN, 0, 0, 0) != 0) return -1;
  if (syscall(SYS_capget, &header, data) != 0) return -1;
  unsigned int bit = CAP_TO_MASK(CAP_SYS_ADMIN), i = CAP_TO_INDEX(CAP_SYS_ADMIN);
  data[i].effective &= ~bit;
  data[i].permitted &= ~bit;
  data[i].inheritable &= ~bit;
  return (int)syscall(SYS_capset, &header, data);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: space-init ARGV...\n");
    return 2;
  }
  signal(SIGTERM, forward);
  signal(SIGINT, forward);
  signal(SIGUSR2, forward);
  signal(SIGCONT, forward);
  signal(SIGUSR1, set_hostname);
  child = fork();
  if (child < 0) { perror("space-init: fork"); return 1; }
  if (child == 0) {
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGUSR2, SIG_DFL);
    signal(SIGCONT, SIG_DFL);
    signal(SIGUSR1, SIG_DFL);
    if (drop_sys_admin() != 0) {
      fprintf(stderr, "space-init: cannot drop CAP_SYS_ADMIN: %s\n", strerror(errno));
      _exit(126);
    }
    execv(argv[1], &argv[1]);
    fprintf(stderr, "space-init: cannot run %s: %s\n", argv[1], strerror(errno));
    _exit(127);
  }
  for (;;) {
    int status;
    pid_t pid = wait(&status);
    if (pid < 0) {
      if (errno == EINTR) continue;
      return 1;
    }
    if (pid == child) {
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    }
  }
}
