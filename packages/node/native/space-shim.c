/*
 * space-shim: runs `runsc run|restore --detach ...` for the node agent and then stays, as the child
 * subreaper of the sandbox and gofer processes runsc leaves behind. Without it they are reparented to
 * the host's PID 1, which on some hosts reaps only about once a second, and every `runsc delete`
 * waits for that (it polls until the processes are gone): ~1 s added to each stop and checkpoint.
 *
 * Usage: space-shim ARGV...   (fd 3, if open, receives "exit <code>\n" when ARGV exits, then closes)
 * Exits when no descendant is left.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: space-shim ARGV...\n");
    return 2;
  }
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) { perror("space-shim: PR_SET_CHILD_SUBREAPER"); return 1; }
  signal(SIGHUP, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  pid_t child = fork();
  if (child < 0) { perror("space-shim: fork"); return 1; }
  if (child == 0) {
    close(3);
    execvp(argv[1], &argv[1]);
    fprintf(stderr, "space-shim: cannot run %s: %s\n", argv[1], strerror(errno));
    _exit(127);
  }
  for (;;) {
    int status;
    pid_t pid = wait(&status);
    if (pid < 0) {
      if (errno == EINTR) continue;
      return 0; /* ECHILD: nothing left to reap */
    }
    if (pid == child) {
      int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
      dprintf(3, "exit %d\n", code);
      close(3);
      /* Nothing of ours may keep the node agent's console file or pipes open. */
      close(0);
      close(1);
      close(2);
    }
  }
}
