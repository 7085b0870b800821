/* probe-send FD REQUEST_HEX
 * Another program than the one that connected: sends REQUEST on the connection it was handed (descriptor FD) and
 * prints the answer frame as hex, or "closed". */
#include "common.h"

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    return exchange(atoi(argv[1]), argv[2]);
}
