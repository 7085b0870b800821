/* probe-connect SOCKET HELLO_HEX NEXT REQUEST_HEX
 * Connects to localauthd, says hello (the welcome is printed), then either sends REQUEST itself (NEXT is "-") or
 * executes NEXT with the open connection (its descriptor number, REQUEST and, on the lane, the mailbox's descriptor
 * as arguments), as a program that hands its connection to another one would. */
#include <sys/un.h>
#include "common.h"

int main(int argc, char **argv) {
    if (argc != 5) return 2;
    int fd = socket(AF_UNIX, SOCK_STREAM, 0); /* no CLOEXEC: the connection survives the exec */
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    strncpy(address.sun_path, argv[1], sizeof address.sun_path - 1);
    if (connect(fd, (struct sockaddr *)&address, sizeof address) != 0) { perror("connect"); return 1; }
    size_t length = strlen(argv[1]);
    int lane = length > 5 && strcmp(argv[1] + length - 5, ".lane") == 0;
    int mailbox = -1;
    if (lane) {
        static unsigned char hello[1 << 12];
        size_t n = unhex(argv[2], hello, sizeof hello);
        if (write(fd, hello, n) != (ssize_t)n) { puts("closed"); return 0; }
        if (receive_welcome(fd, &mailbox) != 0) return 1;
        if (mailbox < 0) { puts("closed"); return 0; }
    } else if (exchange(fd, argv[2]) != 0) {
        return 1;
    }
    fflush(stdout);
    if (strcmp(argv[3], "-") == 0) return lane ? mailbox_exchange(fd, mailbox, argv[4]) : exchange(fd, argv[4]);
    char number[16], box[16];
    snprintf(number, sizeof number, "%d", fd);
    snprintf(box, sizeof box, "%d", mailbox);
    execl(argv[3], argv[3], number, argv[4], box, (char *)NULL);
    perror("exec");
    return 1;
}
