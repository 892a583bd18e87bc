// The pod sandbox's process (containerd's sandbox_image on the local real node,
// tools/oci-images.sh): sleeps until SIGTERM/SIGINT and reaps any zombie it
// inherits (it is PID 1 of a pod's shared PID namespace when one is asked for).
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int sig) { _exit(sig == SIGTERM || sig == SIGINT ? 0 : 1); }

static void on_child(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(void) {
  struct sigaction stop = {.sa_handler = on_stop};
  struct sigaction child = {.sa_handler = on_child, .sa_flags = SA_NOCLDSTOP};
  sigaction(SIGTERM, &stop, NULL);
  sigaction(SIGINT, &stop, NULL);
  sigaction(SIGCHLD, &child, NULL);
  for (;;) pause();
}
