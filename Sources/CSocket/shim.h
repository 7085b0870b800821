#ifndef LA_CSOCKET_SHIM_H
#define LA_CSOCKET_SHIM_H

/* libc's accept4, which Swift's Glibc module leaves out (glibc declares it only under _GNU_SOURCE, and defining that
 * here would make this module's libc types differ from Glibc's): localauthd's lane accepts its connections
 * close-on-exec in the same call, so no program PAM runs meanwhile inherits one. */
#include <sys/socket.h>

extern int accept4(int fd, struct sockaddr *address, socklen_t *length, int flags);

static inline int la_accept_cloexec(int listener) { return accept4(listener, 0, 0, SOCK_CLOEXEC); }

#endif
