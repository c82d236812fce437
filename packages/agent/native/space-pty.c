/*
 * space-pty: runs a command on a new pseudo-terminal inside the sandbox.
 * Usage: space-pty ROWS COLS -- ARGV...
 * fd 0 -> terminal input, terminal output -> fd 1, fd 3 carries "R rows cols\n" resize lines.
 * Exits with the command's exit status (128+signal when killed).
 * Node.js cannot open a PTY without a native addon; this tiny static helper is the daemon's way.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

static int write_all(int fd, const char *buf, ssize_t len) {
  while (len > 0) {
    ssize_t n = write(fd, buf, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) { /* the non-blocking master is full: wait until it drains */
        struct pollfd p = { .fd = fd, .events = POLLOUT };
        poll(&p, 1, 50);
        continue;
      }
      return -1;
    }
    buf += n; len -= n;
  }
  return 0;
}

static void apply_resize(int master, char *line) {
  unsigned rows, cols;
  if (sscanf(line, "R %u %u", &rows, &cols) == 2 && rows > 0 && cols > 0 && rows < 10000 && cols < 10000) {
    struct winsize ws = { .ws_row = rows, .ws_col = cols };
    ioctl(master, TIOCSWINSZ, &ws);
  }
}

int main(int argc, char **argv) {
  if (argc < 5 || strcmp(argv[3], "--") != 0) {
    fprintf(stderr, "usage: space-pty ROWS COLS -- ARGV...\n");
    return 2;
  }
  struct winsize ws = { .ws_row = (unsigned short)atoi(argv[1]), .ws_col = (unsigned short)atoi(argv[2]) };
  int master = posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0 || grantpt(master) < 0 || unlockpt(master) < 0) { perror("space-pty: openpt"); return 1; }
  char *slave_name = ptsname(master);
  if (!slave_name) { perror("space-pty: ptsname"); return 1; }
  ioctl(master, TIOCSWINSZ, &ws);

  /* Closed (close-on-exec) when the child runs the command: input is forwarded only from then on.
     gVisor 20240729 drops what is written to the master before the slave is opened. */
  int started[2];
  if (pipe2(started, O_CLOEXEC) < 0) { perror("space-pty: pipe"); return 1; }
  pid_t pid = fork();
  if (pid < 0) { perror("space-pty: fork"); return 1; }
  if (pid == 0) {
    close(started[0]);
    setsid();
    int slave = open(slave_name, O_RDWR);
    if (slave < 0) { perror("space-pty: open slave"); _exit(1); }
    ioctl(slave, TIOCSCTTY, 0);
    dup2(slave, 0); dup2(slave, 1); dup2(slave, 2);
    if (slave > 2) close(slave);
    close(master);
    close(3);
    execvp(argv[4], &argv[4]);
    fprintf(stderr, "space-pty: cannot run %s: %s\n", argv[4], strerror(errno));
    _exit(127);
  }

  close(started[1]);
  char ignored;
  while (read(started[0], &ignored, 1) < 0 && errno == EINTR) {}
  close(started[0]);
  signal(SIGPIPE, SIG_IGN);
  /* Non-blocking: gVisor 20240729 reports POLLHUP on the master once the slave closes, and a read
     then blocks instead of failing with EIO, which would keep the child's exit from being seen. */
  fcntl(master, F_SETFL, fcntl(master, F_GETFL) | O_NONBLOCK);
  char buf[65536];
  char ctl[256];
  size_t ctl_len = 0;
  int in_open = 1, ctl_open = fcntl(3, F_GETFD) != -1;
  int status = 0, exited = 0;
  for (;;) {
    /* Some kernels (gVisor among them) do not report EOF on the master when the last slave fd
       closes, so the child's exit is polled for too; what it printed last is drained below. */
    if (waitpid(pid, &status, WNOHANG) == pid) { exited = 1; break; }
    struct pollfd fds[3] = {
      { .fd = master, .events = POLLIN },
      { .fd = in_open ? 0 : -1, .events = POLLIN },
      { .fd = ctl_open ? 3 : -1, .events = POLLIN },
    };
    if (poll(fds, 3, 50) < 0) { if (errno == EINTR) continue; break; }
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t n = read(master, buf, sizeof buf);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        /* Nothing to read: POLLHUP without data. The exit is polled for above; the pause keeps a
           child that closed its terminal but runs on from spinning this loop. */
        if (fds[0].revents & POLLHUP) usleep(10000);
      } else if (n <= 0) {
        break; /* EIO once every slave fd is closed: the command is done */
      } else if (write_all(1, buf, n) < 0) {
        break;
      }
    }
    if (in_open && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) {
      ssize_t n = read(0, buf, sizeof buf);
      if (n <= 0) in_open = 0;
      else write_all(master, buf, n);
    }
    if (ctl_open && (fds[2].revents & (POLLIN | POLLHUP | POLLERR))) {
      ssize_t n = read(3, ctl + ctl_len, sizeof ctl - 1 - ctl_len);
      if (n <= 0) { ctl_open = 0; continue; }
      ctl_len += n;
      ctl[ctl_len] = 0;
      char *nl;
      while ((nl = strchr(ctl, '\n')) != NULL) {
        *nl = 0;
        apply_resize(master, ctl);
        size_t used = (size_t)(nl - ctl) + 1;
        memmove(ctl, nl + 1, ctl_len - used + 1);
        ctl_len -= used;
      }
      if (ctl_len == sizeof ctl - 1) ctl_len = 0; /* an overlong line is dropped */
    }
  }
  if (exited) {
    for (;;) {
      ssize_t n = read(master, buf, sizeof buf);
      if (n <= 0 || write_all(1, buf, n) < 0) break;
    }
  } else {
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}
