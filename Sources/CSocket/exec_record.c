/* Definitions of CSocket.h's exec record functions, which says what each is for. */
#define _GNU_SOURCE
#include "CSocket.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/fanotify.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef __WNOTHREAD
#define __WNOTHREAD 0x20000000
#endif

int la_exec_record_open(void) {
    return fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC | FAN_NONBLOCK | FAN_REPORT_TID,
                         O_RDONLY | O_CLOEXEC | O_LARGEFILE);
}

int la_exec_record_mark(int fd, const char *path) {
    return fanotify_mark(fd, FAN_MARK_ADD, FAN_OPEN_EXEC_PERM, AT_FDCWD, path);
}

int la_exec_record_read(int fd, struct la_exec_event *events, int capacity) {
    /* Each event's metadata is 24 bytes; the buffer holds no more than `capacity` of them. */
    char buffer[64 * sizeof(struct fanotify_event_metadata)] __attribute__((aligned(8)));
    size_t room = (size_t)capacity * sizeof(struct fanotify_event_metadata);
    if (room > sizeof buffer) room = sizeof buffer;
    ssize_t count;
    do count = read(fd, buffer, room); while (count < 0 && errno == EINTR);
    if (count < 0) return (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : -1;
    int found = 0;
    for (struct fanotify_event_metadata *event = (void *)buffer; FAN_EVENT_OK(event, count) && found < capacity;
         event = FAN_EVENT_NEXT(event, count)) {
        if (event->fd < 0) continue; /* a queue overflow: never for permission events, which are not dropped */
        struct stat info;
        int known = fstat(event->fd, &info) == 0;
        events[found].thread = event->pid;
        events[found].descriptor = event->fd;
        events[found].device = known ? (uint64_t)info.st_dev : 0;
        events[found].inode = known ? (uint64_t)info.st_ino : 0;
        found++;
    }
    return found;
}

int la_exec_record_answer(int fd, int32_t descriptor) {
    struct fanotify_response response = {.fd = descriptor, .response = FAN_ALLOW};
    ssize_t written;
    do written = write(fd, &response, sizeof response); while (written < 0 && errno == EINTR);
    close(descriptor);
    return written == (ssize_t)sizeof response ? 0 : -1;
}

int la_trace_seize(int32_t thread) {
    if (ptrace(PTRACE_SEIZE, thread, 0, (void *)(long)PTRACE_O_TRACEEXEC) != 0) return -1;
    if (ptrace(PTRACE_INTERRUPT, thread, 0, 0) != 0) {
        int saved = errno;
        ptrace(PTRACE_DETACH, thread, 0, 0);
        errno = saved;
        return -1;
    }
    return 0;
}

int la_trace_poll(int32_t id, unsigned long *message, int *signal) {
    int status;
    pid_t found;
    do found = waitpid(id, &status, WNOHANG | __WALL | __WNOTHREAD); while (found < 0 && errno == EINTR);
    if (found < 0) return errno == ECHILD ? 4 : -1;
    if (found == 0) return 0;
    if (WIFEXITED(status) || WIFSIGNALED(status)) return 3;
    if (!WIFSTOPPED(status)) return 0;
    int event = status >> 16;
    *message = 0;
    *signal = 0;
    if (event == PTRACE_EVENT_EXEC) {
        ptrace(PTRACE_GETEVENTMSG, found, 0, message);
        return 1;
    }
    /* A signal-delivery stop (no event) holds a signal the thread must still get; an interrupt or group stop
     * (PTRACE_EVENT_STOP) does not. */
    if (event == 0) *signal = WSTOPSIG(status);
    return 2;
}

int la_trace_detach(int32_t id, int signal) {
    return ptrace(PTRACE_DETACH, id, 0, (void *)(long)signal) == 0 ? 0 : -1;
}
