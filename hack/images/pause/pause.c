// The sandbox ("pause") process of every pod on the local test nodes: it holds the pod's
// namespaces and, as PID 1 of a shared PID namespace, reaps orphaned children. Same contract as
// Kubernetes' build/pause: exit 0 on SIGINT/SIGTERM, never exit otherwise. Built statically, so
// the image is this one file.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void OnTerminate(int sig) {
  (void)sig;
  _exit(0);
}

static void OnChild(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "-v") == 0) {
    printf("dra-pause\n");
    return 0;
  }
  if (getpid() != 1) fprintf(stderr, "warning: pause should be the first process\n");
  struct sigaction term = {.sa_handler = OnTerminate};
  struct sigaction child = {.sa_handler = OnChild, .sa_flags = SA_NOCLDSTOP};
  if (sigaction(SIGINT, &term, NULL) < 0 || sigaction(SIGTERM, &term, NULL) < 0 ||
      sigaction(SIGCHLD, &child, NULL) < 0) {
    perror("sigaction");
    return 1;
  }
  for (;;) pause();
}
