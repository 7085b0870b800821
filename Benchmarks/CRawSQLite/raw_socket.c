// The transport's floor for la-bench: a request and its answer between two processes over a Unix stream socket,
// in C, each side sleeping in a blocking read (as a daemon waits for its next request and a client for its answer),
// or, with `spinning`, each side polling with non-blocking reads and yielding between them: the round trip with no
// wake-up at all, the physical floor of two processes talking through the kernel.
#include "raw_sqlite.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int full_read(int fd, unsigned char *buffer, size_t count, int spinning) {
    size_t done = 0;
    while (done < count) {
        ssize_t n = recv(fd, buffer + done, count - done, spinning ? MSG_DONTWAIT : 0);
        if (n < 0 && spinning && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            sched_yield();
            continue;
        }
        if (n <= 0) return -1;
        done += (size_t)n;
    }
    return 0;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double raw_unix_round_trip_ns(int iterations, int request_size, int answer_size, int spinning) {
    int fds[2];
    if (iterations <= 0 || request_size <= 0 || answer_size <= 0 || request_size > 4096 || answer_size > 4096)
        return -1;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return -1;
    pid_t child = fork();
    if (child < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    static unsigned char buffer[4096];
    if (child == 0) {
        // The peer: answers every request; only async-signal-safe calls after fork.
        close(fds[0]);
        for (;;) {
            if (full_read(fds[1], buffer, (size_t)request_size, spinning) != 0) _exit(0);
            if (write(fds[1], buffer, (size_t)answer_size) != answer_size) _exit(1);
        }
    }
    close(fds[1]);
    double *times = malloc(sizeof(double) * (size_t)iterations);
    double median = -1;
    if (times) {
        int ok = 1;
        for (int i = -200; i < iterations && ok; i++) {
            struct timespec start, end;
            clock_gettime(CLOCK_MONOTONIC, &start);
            ok = write(fds[0], buffer, (size_t)request_size) == request_size &&
                 full_read(fds[0], buffer, (size_t)answer_size, spinning) == 0;
            clock_gettime(CLOCK_MONOTONIC, &end);
            if (i >= 0) times[i] = (double)(end.tv_sec - start.tv_sec) * 1e9 + (double)(end.tv_nsec - start.tv_nsec);
        }
        if (ok) {
            qsort(times, (size_t)iterations, sizeof(double), compare_doubles);
            median = times[iterations / 2];
        }
        free(times);
    }
    close(fds[0]);
    int status;
    while (waitpid(child, &status, 0) < 0) {}
    return median;
}
