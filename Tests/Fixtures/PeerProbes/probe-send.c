/* probe-send FD REQUEST_HEX MAILBOX
 * Another program than the one that connected: sends REQUEST on the connection it was handed (descriptor FD; through
 * the lane's mailbox, descriptor MAILBOX, unless that is -1) and prints the answer frame as hex, or "closed". */
#include "common.h"

int main(int argc, char **argv) {
    if (argc != 4) return 2;
    int mailbox = atoi(argv[3]);
    return mailbox >= 0 ? mailbox_exchange(atoi(argv[1]), mailbox, argv[2]) : exchange(atoi(argv[1]), argv[2]);
}
