/* Shared by the two peer probes of DaemonTests: hex frames in, hex frames out, over the socket or, on localauthd's
 * lane after its welcome, through the lane's mailbox (docs/PROTOCOL.md). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/socket.h>

static size_t unhex(const char *text, unsigned char *out, size_t capacity) {
    size_t n = strlen(text) / 2;
    if (n > capacity) exit(2);
    for (size_t i = 0; i < n; i++) sscanf(text + 2 * i, "%2hhx", &out[i]);
    return n;
}

static int read_fully(int fd, unsigned char *buffer, size_t count) {
    size_t done = 0;
    while (done < count) {
        ssize_t n = read(fd, buffer + done, count - done);
        if (n <= 0) return 0;
        done += (size_t)n;
    }
    return 1;
}

/* Writes the frame in `hex` to fd, reads one answer frame and prints it as hex ("closed" at the end of stream). */
static int exchange(int fd, const char *hex) {
    static unsigned char frame[1 << 16];
    size_t n = unhex(hex, frame, sizeof frame);
    if (write(fd, frame, n) != (ssize_t)n) { puts("closed"); return 0; }
    unsigned char header[5];
    if (!read_fully(fd, header, 5)) { puts("closed"); return 0; }
    size_t length = (size_t)header[1] << 24 | (size_t)header[2] << 16 | (size_t)header[3] << 8 | header[4];
    if (length > sizeof frame) return 3;
    if (!read_fully(fd, frame, length)) { puts("closed"); return 0; }
    for (int i = 0; i < 5; i++) printf("%02x", header[i]);
    for (size_t i = 0; i < length; i++) printf("%02x", frame[i]);
    putchar('\n');
    return 0;
}

static void print_frame(const unsigned char *frame, size_t length) {
    for (size_t i = 0; i < length; i++) printf("%02x", frame[i]);
    putchar('\n');
}

/* Reads the welcome frame on fd and prints it as hex; *mailbox gets the descriptor passed with it (-1: none). The
 * descriptor is kept across an exec on purpose: these probes play a program handing its connection on. */
static int receive_welcome(int fd, int *mailbox) {
    unsigned char frame[256];
    struct iovec vector = {frame, sizeof frame};
    union { char buffer[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } control;
    struct msghdr message = {0};
    message.msg_iov = &vector;
    message.msg_iovlen = 1;
    message.msg_control = control.buffer;
    message.msg_controllen = sizeof control.buffer;
    *mailbox = -1;
    ssize_t n = recvmsg(fd, &message, 0);
    if (n < 5) { puts("closed"); return 0; }
    struct cmsghdr *header = CMSG_FIRSTHDR(&message);
    if (header && header->cmsg_type == SCM_RIGHTS) memcpy(mailbox, CMSG_DATA(header), sizeof(int));
    print_frame(frame, (size_t)n);
    return 0;
}

/* Posts the frame in `hex` to the lane's mailbox (descriptor `mailbox`, rings fd when the daemon sleeps), waits for
 * the answer and prints it as hex ("closed" when the connection ended first). */
static int mailbox_exchange(int fd, int mailbox, const char *hex) {
    const size_t request_capacity = 1 << 20, size = 4096 + (1 << 20) + (2 << 20);
    unsigned char *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, mailbox, 0);
    if (base == MAP_FAILED) return 4;
    uint32_t *words = (uint32_t *)base;
    static unsigned char frame[1 << 16];
    size_t n = unhex(hex, frame, sizeof frame);
    uint32_t sequence = __atomic_load_n(&words[0], __ATOMIC_SEQ_CST) + 1;
    memcpy(base + 4096, frame, n);
    __atomic_store_n(&words[1], (uint32_t)n, __ATOMIC_RELEASE);
    __atomic_store_n(&words[0], sequence, __ATOMIC_SEQ_CST);
    unsigned char bell = 1;
    if (__atomic_load_n(&words[192 / 4], __ATOMIC_SEQ_CST)) send(fd, &bell, 1, MSG_NOSIGNAL);
    for (;;) {
        __atomic_store_n(&words[256 / 4], 1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&words[128 / 4], __ATOMIC_SEQ_CST) == sequence) break;
        unsigned char doorbells[32];
        if (recv(fd, doorbells, sizeof doorbells, 0) <= 0 &&
            __atomic_load_n(&words[128 / 4], __ATOMIC_SEQ_CST) != sequence) {
            puts("closed");
            return 0;
        }
    }
    uint32_t length = __atomic_load_n(&words[132 / 4], __ATOMIC_SEQ_CST);
    if (length > (2u << 20)) return 3;
    print_frame(base + 4096 + request_capacity, length);
    return 0;
}
