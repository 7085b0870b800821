/* Definitions of CSocket.h, which says what each is for. _GNU_SOURCE for accept4, memfd_create and the seals. */
#define _GNU_SOURCE
#include "CSocket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <poll.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

/* The proc connector's messages, as the kernel lays them out (linux/netlink.h, linux/connector.h). */
struct la_netlink_address { unsigned short family; unsigned short pad; uint32_t pid; uint32_t groups; };
struct la_netlink_header { uint32_t length; uint16_t type; uint16_t flags; uint32_t sequence; uint32_t pid; };
struct la_connector_header { uint32_t index; uint32_t value; uint32_t sequence; uint32_t ack; uint16_t length;
                             uint16_t flags; };

int la_accept_cloexec(int listener) { return accept4(listener, 0, 0, SOCK_CLOEXEC); }

/* A memfd of `size` bytes, close-on-exec, sealed so that its size never changes again (shrink, grow, and the seals
 * themselves); -1 with errno on failure. */
int la_sealed_memfd(const char *name, long long size) {
    int fd = memfd_create(name, 0x0001U /* MFD_CLOEXEC */ | 0x0002U /* MFD_ALLOW_SEALING */);
    if (fd < 0) return -1;
    if (ftruncate(fd, (off_t)size) != 0 ||
        fcntl(fd, 1033 /* F_ADD_SEALS */, 0x0001 /* SEAL_SEAL */ | 0x0002 /* SEAL_SHRINK */ | 0x0004 /* SEAL_GROW */) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

/* The seals of a memfd (F_GET_SEALS), -1 when it has none to tell. */
int la_seals(int fd) { return fcntl(fd, 1034 /* F_GET_SEALS */); }

/* Room for one descriptor's control message, aligned as the kernel wants it. */
typedef union {
    char buffer[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
} one_descriptor;

/* A message of one buffer, `vector`, with `control` zeroed as its control space. */
static struct msghdr message_with_control(struct iovec *vector, one_descriptor *control) {
    memset(control, 0, sizeof *control);
    struct msghdr message = {0};
    message.msg_iov = vector;
    message.msg_iovlen = 1;
    message.msg_control = control->buffer;
    message.msg_controllen = sizeof control->buffer;
    return message;
}

/* Sends `length` bytes with the descriptor `passed` attached (SCM_RIGHTS), without SIGPIPE; what sendmsg returns. */
ssize_t la_send_with_descriptor(int socket, const void *bytes, size_t length, int passed) {
    struct iovec vector = {(void *)bytes, length};
    one_descriptor control;
    struct msghdr message = message_with_control(&vector, &control);
    struct cmsghdr *header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(header), &passed, sizeof(int));
    return sendmsg(socket, &message, MSG_NOSIGNAL);
}

/* Receives up to `capacity` bytes and at most one passed descriptor, close-on-exec (*passed = -1 when none came;
 * any further descriptors the kernel truncates away are closed by it); what recvmsg returns. */
ssize_t la_receive_with_descriptor(int socket, void *bytes, size_t capacity, int *passed) {
    struct iovec vector = {bytes, capacity};
    one_descriptor control;
    struct msghdr message = message_with_control(&vector, &control);
    *passed = -1;
    ssize_t count = recvmsg(socket, &message, 0x40000000 /* MSG_CMSG_CLOEXEC */);
    if (count < 0) return count;
    for (struct cmsghdr *header = CMSG_FIRSTHDR(&message); header; header = CMSG_NXTHDR(&message, header)) {
        if (header->cmsg_level == SOL_SOCKET && header->cmsg_type == SCM_RIGHTS &&
            header->cmsg_len >= CMSG_LEN(sizeof(int))) {
            size_t count_fds = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t index = 0; index < count_fds; index++) {
                int fd;
                memcpy(&fd, CMSG_DATA(header) + index * sizeof(int), sizeof(int));
                if (*passed < 0) *passed = fd; else close(fd);
            }
        }
    }
    return count;
}

/* PR_SET_NAME: 15 bytes and a NUL. */
int la_name_current_thread(const char *name) { return prctl(PR_SET_NAME, name, 0, 0, 0); }

/* Only the events localauthd reads take room in the queue: an exec, the exit of a whole process (its leader: a
 * thread's exit changes nothing a caller's identity rests on) and, `with_comm`, a rename (for la_proc_events_work).
 * Forks and thread exits, most of a busy machine's events, never queue, so a loss is rarer. The classic BPF program
 * reads from the netlink header: `what` at 36, the event's pid at 52 and tgid at 56, each as a big-endian word
 * (hence ntohl on the host's values). Without comm events its second test repeats the first. Replaces any filter. */
static int attach_events_filter(int fd, int with_comm) {
    uint32_t second = with_comm ? LA_PROC_EVENT_COMM : LA_PROC_EVENT_EXEC;
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 36),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ntohl(LA_PROC_EVENT_EXEC), 6, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ntohl(second), 5, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ntohl(LA_PROC_EVENT_EXIT), 0, 5),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 56),
        BPF_STMT(BPF_MISC | BPF_TAX, 0),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 52),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_X, 0, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, 0xffffffff),
        BPF_STMT(BPF_RET | BPF_K, 0),
    };
    struct sock_fprog program = {sizeof code / sizeof code[0], code};
    return setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &program, sizeof program);
}

/* A non-blocking, close-on-exec netlink socket subscribed to process events, with a receive buffer of `buffer`
 * bytes; -1 with errno when the kernel refuses. */
int la_proc_events_open(int buffer) {
    int fd = socket(16 /* AF_NETLINK */, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 11 /* NETLINK_CONNECTOR */);
    if (fd < 0) return -1;
    /* Past net.core.rmem_max where allowed (CAP_NET_ADMIN, which the subscription needs anyway). */
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buffer, sizeof buffer) != 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof buffer);
    if (attach_events_filter(fd, 1) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    struct la_netlink_address address = {16, 0, 0, 1 /* CN_IDX_PROC */};
    struct {
        struct la_netlink_header netlink;
        struct la_connector_header connector;
        uint32_t operation;
    } __attribute__((packed)) listen = {
        {sizeof listen, 3 /* NLMSG_DONE */, 0, 0, 0}, {1, 1 /* CN_IDX_PROC, CN_VAL_PROC */, 0, 0, 4, 0},
        1 /* PROC_CN_MCAST_LISTEN */};
    if (bind(fd, (struct sockaddr *)&address, sizeof address) != 0 ||
        send(fd, &listen, sizeof listen, 0) != (ssize_t)sizeof listen) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

int la_proc_events_ignore_comm(int fd) { return attach_events_filter(fd, 0); }

/* The next queued event: 1 with *what (LA_PROC_EVENT_*, NONE for events of no interest), the thread's *pid and the
 * process's *tgid; 0 when none is queued, -2 when the kernel dropped events (the queue overflowed: ENOBUFS), -1 on
 * another error. */
int la_proc_events_next(int fd, uint32_t *what, int32_t *pid, int32_t *tgid, uint64_t *timestamp) {
    union { char bytes[512]; struct la_netlink_header align; } buffer;
    for (;;) {
        ssize_t count = recv(fd, buffer.bytes, sizeof buffer.bytes, MSG_DONTWAIT);
        if (count < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
            return errno == ENOBUFS ? -2 : -1;
        }
        *what = LA_PROC_EVENT_NONE;
        *pid = 0;
        *tgid = 0;
        size_t offset = sizeof(struct la_netlink_header) + sizeof(struct la_connector_header);
        if ((size_t)count < offset + 24) return 1;
        /* struct proc_event: what, cpu, timestamp, then the event's pid and tgid (exec, exit and comm alike). */
        memcpy(what, buffer.bytes + offset, 4);
        if (timestamp) memcpy(timestamp, buffer.bytes + offset + 8, 8);
        memcpy(pid, buffer.bytes + offset + 16, 4);
        memcpy(tgid, buffer.bytes + offset + 20, 4);
        if (*what != LA_PROC_EVENT_EXEC && *what != LA_PROC_EVENT_EXIT && *what != LA_PROC_EVENT_COMM)
            *what = LA_PROC_EVENT_NONE;
        return 1;
    }
}

/* Whether events reach `fd`: renames this thread to its own name (the kernel reports a comm event for that) and
 * waits up to `milliseconds` for the event of this very thread, as numbered in this namespace. A listener in
 * another pid namespace, or one the kernel does not serve, never sees it. */
int la_proc_events_work(int fd, int milliseconds) {
    char name[16] = {0};
    if (prctl(PR_GET_NAME, name, 0, 0, 0) != 0 || prctl(PR_SET_NAME, name, 0, 0, 0) != 0) return 0;
    int32_t self = (int32_t)syscall(SYS_gettid);
    for (int waited = 0; waited <= milliseconds; waited += 10) {
        uint32_t what;
        int32_t pid, tgid;
        int next;
        while ((next = la_proc_events_next(fd, &what, &pid, &tgid, NULL)) != 0) {
            if (next == -1) return 0;
            if (next == 1 && what == LA_PROC_EVENT_COMM && pid == self) return 1;
        }
        struct pollfd readable = {fd, POLLIN, 0};
        poll(&readable, 1, 10);
    }
    return 0;
}
