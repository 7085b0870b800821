/* Shared by the two peer probes of DaemonTests: hex frames in, hex frames out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
