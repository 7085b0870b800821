/* probe-connect SOCKET HELLO_HEX NEXT REQUEST_HEX
 * Connects to localauthd, says hello (the welcome is printed), then either sends REQUEST itself (NEXT is "-") or
 * executes NEXT with the open connection (its descriptor number and REQUEST as arguments), as a program that hands
 * its connection to another one would. */
#include <sys/socket.h>
#include <sys/un.h>
#include "common.h"

int main(int argc, char **argv) {
    if (argc != 5) return 2;
    int fd = socket(AF_UNIX, SOCK_STREAM, 0); /* no CLOEXEC: the connection survives the exec */
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    strncpy(address.sun_path, argv[1], sizeof address.sun_path - 1);
    if (connect(fd, (struct sockaddr *)&address, sizeof address) != 0) { perror("connect"); return 1; }
    if (exchange(fd, argv[2]) != 0) return 1;
    fflush(stdout);
    if (strcmp(argv[3], "-") == 0) return exchange(fd, argv[4]);
    char number[16];
    snprintf(number, sizeof number, "%d", fd);
    execl(argv[3], argv[3], number, argv[4], (char *)NULL);
    perror("exec");
    return 1;
}
