#ifndef LA_CSOCKET_H
#define LA_CSOCKET_H

/* What Swift's Glibc module leaves out, compiled in socket.c (which defines _GNU_SOURCE; defining it here would make
 * this module's libc types differ from Glibc's):
 * - accept4, so the lane accepts its connections close-on-exec in the same call (no program PAM runs meanwhile
 *   inherits one);
 * - memfd_create and file seals, for the lane's mailbox: memory shared by localauthd and one client, which the
 *   daemon makes, seals against shrinking (a client cannot make the daemon's next access fault) and passes with the
 *   welcome (SCM_RIGHTS);
 * - naming a thread for the kernel (PR_SET_NAME);
 * - the kernel's process events (the proc connector), from which localauthd learns that a connected process
 *   executed another program or exited;
 * - and, inline here because each is one instruction on the lane's polling path, the atomic loads and stores both
 *   processes use on the mailbox's words, and a processor pause. */
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* accept4(listener, NULL, NULL, SOCK_CLOEXEC). */
int la_accept_cloexec(int listener);

/* A memfd of `size` bytes, close-on-exec, sealed so that its size never changes again (shrink, grow, and the seals
 * themselves); -1 with errno on failure. */
int la_sealed_memfd(const char *name, long long size);

/* The seals of a memfd (F_GET_SEALS), -1 when it has none to tell. */
int la_seals(int fd);
#define LA_SEAL_SHRINK 0x0002

/* Sends `length` bytes with the descriptor `passed` attached (SCM_RIGHTS), without SIGPIPE; what sendmsg returns. */
ssize_t la_send_with_descriptor(int socket, const void *bytes, size_t length, int passed);

/* Receives up to `capacity` bytes and at most one passed descriptor, close-on-exec (*passed = -1 when none came;
 * any further descriptors the kernel truncates away are closed by it); what recvmsg returns. */
ssize_t la_receive_with_descriptor(int socket, void *bytes, size_t capacity, int *passed);

/* Names the calling thread for the kernel (15 bytes and a NUL); what prctl returns. */
int la_name_current_thread(const char *name);

/* The mailbox's words: 32-bit, aligned, shared between two processes. */
static inline void la_store_release(uint32_t *word, uint32_t value) { __atomic_store_n(word, value, __ATOMIC_RELEASE); }
static inline uint32_t la_load_ordered(const uint32_t *word) { return __atomic_load_n(word, __ATOMIC_SEQ_CST); }
static inline void la_store_ordered(uint32_t *word, uint32_t value) { __atomic_store_n(word, value, __ATOMIC_SEQ_CST); }

/* A hint to the processor that this thread is polling (x86 PAUSE, ARM YIELD). */
static inline void la_processor_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* The kernel's process events (NETLINK_CONNECTOR / CN_IDX_PROC): the kernel queues an exec or exit before the process
 * runs another instruction. Needs CAP_NET_ADMIN in the initial namespaces (localauthd runs as root). */
#define LA_PROC_EVENT_NONE 0u
#define LA_PROC_EVENT_EXEC 0x00000002u
#define LA_PROC_EVENT_COMM 0x00000200u
#define LA_PROC_EVENT_EXIT 0x80000000u

/* A non-blocking, close-on-exec netlink socket subscribed to process events, with a receive buffer of `buffer`
 * bytes; -1 with errno when the kernel refuses. */
int la_proc_events_open(int buffer);

/* The next queued event: 1 with *what (LA_PROC_EVENT_*, NONE for events of no interest), the thread's *pid and the
 * process's *tgid, and (when `timestamp` is not NULL) when it happened, in CLOCK_MONOTONIC nanoseconds; 0 when none is
 * queued, -2 when the kernel dropped events (the queue overflowed: ENOBUFS), -1 on another error. */
int la_proc_events_next(int fd, uint32_t *what, int32_t *pid, int32_t *tgid, uint64_t *timestamp);

/* Replaces `fd`'s filter with one that passes only execs and whole-process exits: no comm events (any program can
 * send those as fast as it likes, with prctl(PR_SET_NAME)). After la_proc_events_work, which needs them. */
int la_proc_events_ignore_comm(int fd);

/* Whether events reach `fd`: renames this thread to its own name (the kernel reports a comm event for that) and
 * waits up to `milliseconds` for the event of this very thread, as numbered in this namespace. A listener in
 * another pid namespace, or one the kernel does not serve, never sees it. */
int la_proc_events_work(int fd, int milliseconds);

/* The exec record (ExecRecord.swift): fanotify's exec permission events on the registered executables, and a
 * ptrace stop that tells a finished exec from one that failed. Both need CAP_SYS_ADMIN / CAP_SYS_PTRACE. */

/* One exec permission event: the thread that opens the file to execute it, the file (device, inode), and the
 * descriptor the answer names (closed by la_exec_record_answer). */
struct la_exec_event { int32_t thread; int32_t descriptor; uint64_t device; uint64_t inode; };

/* A non-blocking, close-on-exec fanotify group of the content class that reports thread ids; -1 with errno. */
int la_exec_record_open(void);

/* Asks for an exec permission event whenever the file `path` names now (its inode) is opened to be executed. */
int la_exec_record_mark(int fd, const char *path);

/* Up to `capacity` queued events into `events`: their count, 0 when none is queued, -1 with errno on an error.
 * Every event returned must be answered. */
int la_exec_record_read(int fd, struct la_exec_event *events, int capacity);

/* Lets the exec go on and closes the event's descriptor. */
int la_exec_record_answer(int fd, int32_t descriptor);

/* Attaches to `thread` (PTRACE_SEIZE with PTRACE_O_TRACEEXEC) and asks it to stop at its next return to user space
 * (PTRACE_INTERRUPT): 0, or -1 with errno (EPERM: another tracer holds it, or it may not be traced). */
int la_trace_seize(int32_t thread);

/* What became of `id`, a thread this thread traces, without waiting: 0 nothing yet; 1 it stopped at the end of a
 * successful exec (*message: the thread id it had before; the stop is reported under the process id, which an exec by
 * another thread than the first gives it); 2 it stopped anywhere else (*signal: the signal to pass on, or 0); 3 it is
 * gone; 4 `id` is no tracee (or child) of this thread; -1 with errno. Asks about `id` alone: never reaps a child that
 * some other thread of the process started. */
int la_trace_poll(int32_t id, unsigned long *message, int *signal);

/* Detaches from a stopped thread, passing `signal` on. */
int la_trace_detach(int32_t id, int signal);

#endif
