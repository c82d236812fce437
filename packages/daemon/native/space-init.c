/*
 * space-init: PID 1 of every sandbox. Starts the daemon, reaps every orphaned process (Node.js only
 * waits for its own children, so without this zombies would pile up against the pid limit), forwards
 * SIGTERM/SIGINT to the daemon, and SIGUSR2 (the node agent's "listen again" after a checkpoint or a
 * restore: the runtime can signal a container's init even when a restored process keeps the id of the
 * container it was checkpointed in), and exits with the daemon's status.
 * Usage: space-init ARGV...
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile pid_t child = 0;

static void forward(int sig) {
  if (child > 0) kill(child, sig);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: space-init ARGV...\n");
    return 2;
  }
  signal(SIGTERM, forward);
  signal(SIGINT, forward);
  signal(SIGUSR2, forward);
  child = fork();
  if (child < 0) { perror("space-init: fork"); return 1; }
  if (child == 0) {
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGUSR2, SIG_DFL);
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
