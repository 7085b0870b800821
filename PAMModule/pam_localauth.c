/*
 * pam_localauth.so: the login keychain of swift-local-authentication.
 *
 *   auth      keeps the password the stack's password module (pam_unix) read, for the session step; with the
 *             option `finger`, placed before pam_unix, first offers the finger and the password at once (one prompt,
 *             "Password or finger: "): a finger of the user that matches is PAM_SUCCESS, a typed password is handed on
 *             as PAM_AUTHTOK for pam_unix (try_first_pass), which checks it
 *   session   open: hands it to localauthd, which checks it through its own PAM service and unlocks the user's
 *             keychain, then wipes it; close: tells localauthd the session ended (the last one locks the keychain)
 *   password  after the password changed, hands the old and new passwords to localauthd, which re-seals the
 *             keychain's class keys under the new one
 *
 * It never prompts, never fails a login or a password change because of the keychain (it logs instead), and never
 * logs a password. It talks to localauthd from a child process it forks and switches to the user, so the daemon
 * learns who is asking from the kernel (SO_PEERCRED), as for every other client; the daemon names the login session
 * by that child's parent, the program running this stack.
 *
 * Written in C on purpose: it is loaded into login, sshd and display managers, and brings nothing into them but libc
 * and libpam. The wire format is docs/PROTOCOL.md's, pinned byte for byte by WireFormatTests.
 *
 * Arguments: socket=PATH (default /run/localauthd/socket), timeout=SECONDS (default 10), debug, finger, lid=PATH
 * (the lid's state file, for tests; default every /proc/acpi/button/lid/<name>/state).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <termios.h>
#include <sys/wait.h>
#include <syslog.h>
#include <unistd.h>

#include <security/pam_ext.h>
#include <security/pam_modules.h>

#define EXPORT __attribute__((visibility("default")))
#define DATA_NAME "pam_localauth_authtok"
#define FINGER_DATA_NAME "pam_localauth_finger"
#define FRAME_LIMIT 65536

/* A test driver may define this to check that a buffer that held a password is all zeros before it is freed; in
 * login, sshd and display managers it is absent (NULL). */
extern void pam_localauth_wiped(const void *region, size_t length) __attribute__((weak));

struct options {
    const char *socket;
    int timeout;
    int debug;
    int finger;
    const char *lid;
};

static void parse_options(int argc, const char **argv, struct options *options) {
    options->socket = "/run/localauthd/socket";
    options->timeout = 10;
    options->debug = 0;
    options->finger = 0;
    options->lid = NULL;
    for (int i = 0; i < argc; i++) {
        if (strncmp(argv[i], "socket=", 7) == 0) options->socket = argv[i] + 7;
        else if (strncmp(argv[i], "timeout=", 8) == 0) {
            int value = atoi(argv[i] + 8);
            if (value >= 1 && value <= 120) options->timeout = value;
        } else if (strcmp(argv[i], "debug") == 0) options->debug = 1;
        else if (strcmp(argv[i], "finger") == 0) options->finger = 1;
        else if (strncmp(argv[i], "lid=", 4) == 0) options->lid = argv[i] + 4;
    }
}

static void wipe(void *region, size_t length) {
    explicit_bzero(region, length);
    if (pam_localauth_wiped) pam_localauth_wiped(region, length);
}

/* ---- Requests: frames built before the fork, so the child needs no allocation. ---- */

struct buffer {
    unsigned char *bytes;
    size_t count, capacity;
    int failed;
};

static void put(struct buffer *b, const void *bytes, size_t count) {
    if (b->failed) return;
    if (b->count + count > b->capacity) {
        size_t capacity = (b->count + count) * 2;
        unsigned char *grown = malloc(capacity);
        if (!grown) { b->failed = 1; return; }
        if (b->bytes) {
            memcpy(grown, b->bytes, b->count);
            wipe(b->bytes, b->capacity);
            free(b->bytes);
        }
        b->bytes = grown;
        b->capacity = capacity;
    }
    memcpy(b->bytes + b->count, bytes, count);
    b->count += count;
}

static void put_u32(struct buffer *b, uint32_t value) {
    unsigned char bytes[4] = {value >> 24, value >> 16, value >> 8, value};
    put(b, bytes, 4);
}

static void put_field(struct buffer *b, unsigned char tag, const void *bytes, size_t count) {
    put(b, &tag, 1);
    put_u32(b, (uint32_t)count);
    put(b, bytes, count);
}

static void frees_wiped(struct buffer *b) {
    if (b->bytes) {
        wipe(b->bytes, b->capacity);
        free(b->bytes);
    }
    b->bytes = NULL;
    b->count = b->capacity = 0;
}

/* hello(versions [1], accessGroups [], allGroups false), then login(1, request): both frames, one after the other.
 * kind 1 sessionOpened(password?), 2 sessionClosed, 3 passwordChanged(old, new), 4 fingerOffered, 5 verifyFinger. */
static int build_request(struct buffer *b, int kind, const char *first, const char *second) {
    static const unsigned char hello[] = {
        0x01, 0, 0, 0, 0x29, 0x01, 0, 0, 0, 0x24,                           /* frame, ClientMessage.hello */
        0x01, 0, 0, 0, 0x10, 0, 0, 0, 1, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 1, /* versions [1] */
        0x02, 0, 0, 0, 4, 0, 0, 0, 0,                                        /* accessGroups [] */
        0x03, 0, 0, 0, 1, 0,                                                 /* allGroups false */
    };
    size_t first_length = first ? strlen(first) : 0, second_length = second ? strlen(second) : 0;
    size_t payload = 0; /* the LoginRequest's payload */
    if (kind == 1 && first) payload = 5 + first_length;
    if (kind == 3) payload = 5 + first_length + 5 + second_length;
    size_t request = 5 + payload;        /* LoginRequest: tag, length, payload */
    size_t message = 13 + 5 + request;   /* fields 1 (id) and 2 (the request) */
    put(b, hello, sizeof hello);
    put(b, "\x01", 1);
    put_u32(b, (uint32_t)(5 + message));
    put(b, "\x0a", 1); /* ClientMessage.login */
    put_u32(b, (uint32_t)message);
    unsigned char id[8] = {0, 0, 0, 0, 0, 0, 0, 1};
    put_field(b, 1, id, 8);
    put(b, "\x02", 1);
    put_u32(b, (uint32_t)request);
    unsigned char tag = (unsigned char)kind;
    put(b, &tag, 1);
    put_u32(b, (uint32_t)payload);
    if (kind == 1 && first) put_field(b, 1, first, first_length);
    if (kind == 3) {
        put_field(b, 1, first, first_length);
        put_field(b, 2, second, second_length);
    }
    return b->failed ? -1 : 0;
}

/* ---- Answers ---- */

/* What the child tells the parent through the pipe. */
struct outcome {
    int status; /* 0 answered; 1 not reachable; 2 refused or failed; 3 unexpected answer; 4 cannot become the user */
    int error;  /* errno, for status 1 and 4 */
    int unlocked;
    int64_t sessions;
    int64_t finger; /* the finger steps' answer: 1 offered, 2 matched, 3 not matched, 4 not offered; 0 none */
    char text[200];
};

struct reader {
    const unsigned char *at;
    size_t left;
};

static int take(struct reader *r, size_t count, const unsigned char **bytes) {
    if (count > r->left) return -1;
    *bytes = r->at;
    r->at += count;
    r->left -= count;
    return 0;
}

static int take_u32(struct reader *r, uint32_t *value) {
    const unsigned char *p;
    if (take(r, 4, &p)) return -1;
    *value = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
    return 0;
}

/* The next field of a record: its tag and a reader over its value. */
static int take_field(struct reader *r, unsigned char *tag, struct reader *value) {
    const unsigned char *p;
    uint32_t length;
    if (take(r, 1, &p)) return -1;
    *tag = p[0];
    if (take_u32(r, &length) || take(r, length, &value->at)) return -1;
    value->left = length;
    return 0;
}

static void copy_text(char *to, size_t size, struct reader text) {
    size_t count = text.left < size - 1 ? text.left : size - 1;
    for (size_t i = 0; i < count; i++) to[i] = (text.at[i] >= 0x20 && text.at[i] != 0x7f) ? (char)text.at[i] : '?';
    to[count] = 0;
}

/* Reads one whole frame into `frame` (async-signal-safe: read only). */
static int read_frame(int fd, unsigned char *frame, size_t *length) {
    size_t have = 0, want = 5;
    while (have < want) {
        ssize_t got = read(fd, frame + have, want - have);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return -1;
        have += (size_t)got;
        if (have == 5 && want == 5) {
            uint32_t value = (uint32_t)frame[1] << 24 | (uint32_t)frame[2] << 16 | (uint32_t)frame[3] << 8 | frame[4];
            if (frame[0] != 1 || value > FRAME_LIMIT - 5) return -1;
            want = 5 + value;
        }
    }
    *length = have;
    return 0;
}

/* The daemon's answer to the login request. */
static void read_answer(const unsigned char *frame, size_t length, struct outcome *outcome) {
    struct reader r = {frame + 5, length - 5}, payload, field, value;
    const unsigned char *tag;
    unsigned char field_tag;
    uint32_t payload_length;
    outcome->status = 3;
    if (take(&r, 1, &tag) || take_u32(&r, &payload_length) || take(&r, payload_length, &payload.at)) return;
    payload.left = payload_length;
    if (*tag == 12) { /* refused(reason) */
        if (take_field(&payload, &field_tag, &value) == 0) copy_text(outcome->text, sizeof outcome->text, value);
        outcome->status = 2;
        return;
    }
    /* login (13), keychainFailure (7), authenticationFailure (8): field 1 the request number, field 2 the answer. */
    if (take_field(&payload, &field_tag, &value) || field_tag != 1) return;
    if (take_field(&payload, &field_tag, &field) || field_tag != 2) return;
    if (*tag == 7 || *tag == 8) {
        while (take_field(&field, &field_tag, &value) == 0)
            if (field_tag == 2) copy_text(outcome->text, sizeof outcome->text, value);
        outcome->status = 2;
        return;
    }
    if (*tag != 13) return;
    while (take_field(&field, &field_tag, &value) == 0) {
        if (field_tag == 1 && value.left == 1) outcome->unlocked = value.at[0] == 1;
        if (field_tag == 2 && value.left == 8) {
            uint64_t count = 0;
            for (int i = 0; i < 8; i++) count = count << 8 | value.at[i];
            outcome->sessions = (int64_t)count;
        }
        if (field_tag == 3) copy_text(outcome->text, sizeof outcome->text, value);
        if (field_tag == 4 && value.left == 8) {
            uint64_t answer = 0;
            for (int i = 0; i < 8; i++) answer = answer << 8 | value.at[i];
            outcome->finger = (int64_t)answer;
        }
    }
    outcome->status = 0;
}

/* ---- The child: the user, talking to localauthd. Only async-signal-safe calls from here on. ---- */

static int write_all(int fd, const unsigned char *bytes, size_t count) {
    while (count > 0) {
        ssize_t wrote = write(fd, bytes, count);
        if (wrote < 0 && errno == EINTR) continue;
        if (wrote <= 0) return -1;
        bytes += wrote;
        count -= (size_t)wrote;
    }
    return 0;
}

/* Whether the server at the other end of `fd` runs as root (its credentials when it called listen). */
static int served_by_root(int fd) {
    struct ucred peer;
    socklen_t size = sizeof peer;
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &size) == 0 && size == sizeof peer && peer.uid == 0;
}

/* `wait_seconds`: how long the answer may take (0: no limit, for verifyFinger, which waits for a finger). */
static void converse(const struct options *options, const struct passwd *user, const struct buffer *request,
                     int wait_seconds, int report, pid_t parent) {
    static unsigned char frame[FRAME_LIMIT];
    struct outcome outcome;
    memset(&outcome, 0, sizeof outcome);
    /* Root, or a set-user-ID program such as passwd (effective uid 0): become the user entirely. */
    if (geteuid() == 0) {
        gid_t gid = user->pw_gid;
        if (setgroups(1, &gid) || setgid(user->pw_gid) || setuid(user->pw_uid)) outcome.status = 4;
    }
    if (getuid() != user->pw_uid || geteuid() != user->pw_uid) outcome.status = 4;
    /* Changing ids cleared the parent-death signal: set again, and gone already when the parent went meanwhile. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(0);
    if (outcome.status == 4) {
        outcome.error = errno;
    } else {
        struct sockaddr_un address = {.sun_family = AF_UNIX};
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct timeval timeout = {.tv_sec = wait_seconds};
        size_t length = 0;
        strncpy(address.sun_path, options->socket, sizeof address.sun_path - 1);
        if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout) ||
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout) ||
            connect(fd, (struct sockaddr *)&address, sizeof address)) {
            outcome.status = 1;
            outcome.error = errno;
        } else if (!served_by_root(fd)) {
            /* Only localauthd, which runs as root, is believed: not a program of the user listening at a path the
             * stack was told (a fake daemon's "matched" must not log anyone in). */
            static const char why[] = "the socket's server is not root";
            outcome.status = 2;
            memcpy(outcome.text, why, sizeof why);
        } else if (write_all(fd, request->bytes, 46) || read_frame(fd, frame, &length)) {
            outcome.status = 1;
            outcome.error = errno ? errno : EPROTO;
        } else if (frame[5] != 1) { /* not welcome: refused */
            read_answer(frame, length, &outcome);
        } else if (write_all(fd, request->bytes + 46, request->count - 46) || read_frame(fd, frame, &length)) {
            outcome.status = 1;
            outcome.error = errno ? errno : EPROTO;
        } else {
            read_answer(frame, length, &outcome);
        }
        if (fd >= 0) close(fd);
    }
    explicit_bzero(request->bytes, request->capacity);
    (void)write_all(report, (const unsigned char *)&outcome, sizeof outcome);
}

/* ---- The parent ---- */

static void run_step(const struct options *options, const struct passwd *user, int kind, const char *first,
                     const char *second, int wait_seconds, struct outcome *outcome);
static void run_request(const struct options *options, const struct passwd *user, const struct buffer *request,
                        int wait_seconds, struct outcome *outcome);

/* Runs one login request for the stack's user; what happened, in `outcome`. */
static void ask(pam_handle_t *pamh, const struct options *options, int kind, const char *first,
                const char *second, const char **name, struct outcome *outcome) {
    memset(outcome, 0, sizeof *outcome);
    outcome->status = 3;
    const void *item = NULL;
    if (pam_get_item(pamh, PAM_USER, &item) != PAM_SUCCESS || !item) {
        snprintf(outcome->text, sizeof outcome->text, "no user");
        return;
    }
    *name = item;
    struct passwd entry, *user = NULL;
    char text[4096];
    if (getpwnam_r(*name, &entry, text, sizeof text, &user) || !user) {
        snprintf(outcome->text, sizeof outcome->text, "the user has no passwd entry");
        return;
    }
    run_step(options, user, kind, first, second, options->timeout, outcome);
}

/* Runs one login request as `user`, from a child switched to that user; waits `wait_seconds` for the answer (0: no
 * limit). */
static void run_step(const struct options *options, const struct passwd *user, int kind, const char *first,
                     const char *second, int wait_seconds, struct outcome *outcome) {
    struct buffer request = {0};
    if (build_request(&request, kind, first, second)) {
        memset(outcome, 0, sizeof *outcome);
        outcome->status = 3;
        snprintf(outcome->text, sizeof outcome->text, "out of memory");
        frees_wiped(&request);
        return;
    }
    run_request(options, user, &request, wait_seconds, outcome);
    frees_wiped(&request);
}

/* Copies the constant `text` into the outcome's (no allocation: also in a forked watcher). */
static void set_text(struct outcome *outcome, const char *text) {
    size_t length = strlen(text);
    if (length >= sizeof outcome->text) length = sizeof outcome->text - 1;
    memcpy(outcome->text, text, length);
    outcome->text[length] = 0;
}

/* Runs the built `request` from a child switched to `user`; allocates nothing (the watcher runs it after its fork).
 * The child dies with its parent, and keeps no descriptor of the program running the stack but its report pipe. */
static void run_request(const struct options *options, const struct passwd *user, const struct buffer *request,
                        int wait_seconds, struct outcome *outcome) {
    memset(outcome, 0, sizeof *outcome);
    outcome->status = 3;
    int pipes[2] = {-1, -1};
    if (pipe2(pipes, O_CLOEXEC)) {
        set_text(outcome, "out of descriptors");
        return;
    }
    pid_t parent = getpid();
    pid_t child = fork();
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(0);
        close(pipes[0]);
        if (pipes[1] != 3 && dup2(pipes[1], 3) != 3) _exit(0);
        close_range(4, ~0U, 0);
        converse(options, user, request, wait_seconds, 3, parent);
        _exit(0);
    }
    close(pipes[1]);
    if (child < 0) {
        set_text(outcome, "fork failed");
    } else {
        struct pollfd wait_for = {.fd = pipes[0], .events = POLLIN};
        int ready;
        do ready = poll(&wait_for, 1, wait_seconds ? (wait_seconds + 2) * 1000 : -1);
        while (ready < 0 && errno == EINTR);
        if (ready <= 0 || read(pipes[0], outcome, sizeof *outcome) != (ssize_t)sizeof *outcome) {
            kill(child, SIGKILL);
            memset(outcome, 0, sizeof *outcome);
            outcome->status = 1;
            outcome->error = ETIMEDOUT;
        }
        outcome->text[sizeof outcome->text - 1] = 0;
        while (waitpid(child, NULL, 0) < 0 && errno == EINTR) {}
    }
    close(pipes[0]);
}

/* Logs what happened at `step`; never a password. */
static void report(pam_handle_t *pamh, const struct options *options, const char *name, const struct outcome *o,
                   const char *step) {
    switch (o->status) {
    case 0:
        if (o->text[0])
            pam_syslog(pamh, o->unlocked ? LOG_INFO : LOG_NOTICE, "%s: keychain of %s %s (%lld login sessions): %s",
                       step, name, o->unlocked ? "unlocked" : "locked", (long long)o->sessions, o->text);
        else
            pam_syslog(pamh, LOG_INFO, "%s: keychain of %s %s (%lld login sessions)", step, name,
                       o->unlocked ? "unlocked" : "locked", (long long)o->sessions);
        break;
    case 1:
        pam_syslog(pamh, LOG_ERR, "%s: localauthd not reachable at %s (%s): keychain of %s left as it is", step,
                   options->socket, strerror(o->error), name);
        break;
    case 2:
        pam_syslog(pamh, LOG_ERR, "%s: localauthd refused: %s", step, o->text);
        break;
    case 4:
        pam_syslog(pamh, LOG_ERR, "%s: cannot act as %s (%s)", step, name, strerror(o->error));
        break;
    default:
        pam_syslog(pamh, LOG_ERR, "%s: unexpected answer from localauthd%s%s", step, o->text[0] ? ": " : "",
                   o->text);
    }
}

/* What the auth step keeps for the session step: the password and the user it was given for. */
struct kept {
    char *user;
    char *password;
};

static void cleanup_kept(pam_handle_t *pamh, void *data, int status) {
    (void)pamh;
    (void)status;
    struct kept *kept = data;
    if (kept->password) {
        wipe(kept->password, strlen(kept->password));
        free(kept->password);
    }
    free(kept->user);
    free(kept);
}

/* ---- The finger (option `finger`) ---- */

/* Frees a string kept in the PAM handle (the name of the user a finger authenticated). */
static void cleanup_text(pam_handle_t *pamh, void *data, int status) {
    (void)pamh;
    (void)status;
    free(data);
}

/* Reads the start of the file at `path` into `text` (`size` bytes, NUL-terminated); how many bytes, 0 when none. */
static ssize_t read_start(const char *path, char *text, size_t size) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t count = read(fd, text, size - 1);
    close(fd);
    if (count < 0) count = 0;
    text[count] = 0;
    return count;
}

/* Whether any line of the file at `path` holds `needle` (the file read whole, up to 4 KiB). */
static int file_says(const char *path, const char *needle) {
    char text[4096];
    return read_start(path, text, sizeof text) > 0 && strstr(text, needle) != NULL;
}

/* Whether the lid is closed: `lid=PATH` (tests), else any /proc/acpi/button/lid/<name>/state saying so. */
static int lid_closed(const struct options *options) {
    if (options->lid) return file_says(options->lid, "closed");
    DIR *lids = opendir("/proc/acpi/button/lid");
    if (!lids) return 0;
    int closed = 0;
    struct dirent *entry;
    while (!closed && (entry = readdir(lids))) {
        if (entry->d_name[0] == '.') continue;
        char path[512];
        snprintf(path, sizeof path, "/proc/acpi/button/lid/%s/state", entry->d_name);
        closed = file_says(path, "closed");
    }
    closedir(lids);
    return closed;
}

/* Whether logind knows this process's session as remote, or as one without a seat (the session named by the audit
 * session id, as logind names them); no record: not known as remote. */
static int logind_session_is_remote(void) {
    char id[32], path[128];
    if (read_start("/proc/self/sessionid", id, sizeof id) == 0 || strcmp(id, "4294967295") == 0) return 0;
    snprintf(path, sizeof path, "/run/systemd/sessions/%s", id);
    if (access(path, R_OK) != 0) return 0;
    return file_says(path, "\nREMOTE=1") || !file_says(path, "\nSEAT=");
}

/* Whether the environment this program was started with (/proc/self/environ: what sudo clears from its own does
 * not matter) names an SSH connection: a program of the user can clear it, which only keeps the finger from being
 * offered to itself. */
static int started_over_ssh(void) {
    char text[65536];
    ssize_t count = read_start("/proc/self/environ", text, sizeof text);
    for (char *entry = text; entry < text + count; entry += strlen(entry) + 1)
        if (!strncmp(entry, "SSH_CONNECTION=", 15) || !strncmp(entry, "SSH_CLIENT=", 11) || !strncmp(entry, "SSH_TTY=", 8))
            return 1;
    return 0;
}

/* Whether this session's leader was started by sshd (its parent's executable), which a program of the user cannot
 * change. */
static int session_started_by_sshd(void) {
    char path[64], stat_line[512], exe[256];
    pid_t leader = getsid(0);
    if (leader <= 0) return 0;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)leader);
    if (read_start(path, stat_line, sizeof stat_line) == 0) return 0;
    char *end = strrchr(stat_line, ')'); /* the name may hold spaces and parentheses: the state follows the last ) */
    int parent = 0;
    if (!end || sscanf(end + 1, " %*c %d", &parent) != 1 || parent <= 1) return 0;
    snprintf(path, sizeof path, "/proc/%d/exe", parent);
    ssize_t length = readlink(path, exe, sizeof exe - 1);
    if (length <= 0) return 0;
    exe[length] = 0;
    const char *name = strrchr(exe, '/');
    name = name ? name + 1 : exe;
    /* OpenSSH 9.8 on runs a session as sshd-session. */
    return strcmp(name, "sshd") == 0 || strcmp(name, "sshd-session") == 0;
}

/* Why no finger is offered here, NULL when one may be: nobody can touch the reader from a remote session, nor with
 * the lid closed. */
static const char *finger_not_here(pam_handle_t *pamh, const struct options *options) {
    const void *host = NULL;
    if (pam_get_item(pamh, PAM_RHOST, &host) == PAM_SUCCESS && host && *(const char *)host)
        return "a remote session (PAM_RHOST)";
    if (getenv("SSH_CONNECTION") || getenv("SSH_CLIENT") || getenv("SSH_TTY") || started_over_ssh())
        return "a session over SSH";
    if (session_started_by_sshd()) return "a session over SSH (its leader's parent is sshd)";
    if (logind_session_is_remote()) return "a remote session, or one without a seat (logind)";
    if (lid_closed(options)) return "the lid is closed";
    return NULL;
}

/* The watcher: root, in the process group of the program running the stack (so the terminal's signals reach it
 * too), dying with it. Asks whether the finger is offered ('O' or 'N' to `report`), then verifies until a finger of
 * the user matches ('M', then a newline put in the terminal's input, which ends the prompt), the finger is no longer
 * offered (the lockout), or localauthd is gone; the parent kills it as soon as the prompt returns, and its child
 * dies with it. The requests were built before its fork: it allocates nothing. The newline goes in only while the
 * program that prompts is the terminal's foreground (not stopped, not gone), and only when the parent can still
 * read the 'M' that says so. */
static void watch_finger(const struct options *options, const struct passwd *user, const struct buffer *offered_request,
                         const struct buffer *verify_request, int tty, pid_t prompting, int report) {
    struct outcome outcome;
    run_request(options, user, offered_request, options->timeout, &outcome);
    unsigned char offered = outcome.status == 0 && outcome.finger == 1 ? 'O' : 'N';
    if (write_all(report, &offered, 1) || offered != 'O') return;
    for (;;) {
        run_request(options, user, verify_request, 0, &outcome);
        if (outcome.status == 0 && outcome.finger == 2) {
            if (write_all(report, (const unsigned char *)"M", 1)) return;
            char newline = '\n';
            if (tcgetpgrp(tty) == prompting) (void)ioctl(tty, TIOCSTI, &newline);
            return;
        }
        if (outcome.status != 0 || outcome.finger != 3) return;
    }
}

/* Kills the watcher (its child talking to localauthd dies with it, and localauthd cancels the verify and frees the
 * reader when the connection closes) and reaps it. */
static void stop_watcher(pid_t watcher) {
    kill(watcher, SIGKILL);
    while (waitpid(watcher, NULL, 0) < 0 && errno == EINTR) {}
}

/* Offers the finger and the password at once, on the terminal: PAM_SUCCESS when a finger of the user matched;
 * PAM_IGNORE when the password was typed (it is PAM_AUTHTOK now, for pam_unix's try_first_pass) or when nothing was
 * asked (no finger here: the next module prompts); PAM_CONV_ERR when the prompt failed. Without a controlling
 * terminal (the helper of a graphical polkit agent, a display manager's conversation) no finger is offered: PAM
 * has no way to take back a prompt another program shows, so the password prompt comes at once, as without the
 * option. pkttyagent's helper has the agent's terminal, and the agent reads it: there the finger is offered. */
static int finger_or_password(pam_handle_t *pamh, const struct options *options) {
    const void *item = NULL;
    if (pam_get_item(pamh, PAM_USER, &item) != PAM_SUCCESS || !item) return PAM_IGNORE;
    const char *name = item;
    const char *why = finger_not_here(pamh, options);
    if (why) {
        if (options->debug) pam_syslog(pamh, LOG_DEBUG, "auth: no finger offered to %s: %s", name, why);
        return PAM_IGNORE;
    }
    struct passwd entry, *user = NULL;
    char text[4096];
    if (getpwnam_r(name, &entry, text, sizeof text, &user) || !user) return PAM_IGNORE;
    int tty = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (tty < 0) {
        if (options->debug) pam_syslog(pamh, LOG_DEBUG, "auth: no finger offered to %s: no terminal", name);
        return PAM_IGNORE;
    }
    int pipes[2];
    struct buffer offered_request = {0}, verify_request = {0};
    if (build_request(&offered_request, 4, NULL, NULL) || build_request(&verify_request, 5, NULL, NULL) ||
        pipe2(pipes, O_CLOEXEC)) {
        frees_wiped(&offered_request);
        frees_wiped(&verify_request);
        close(tty);
        return PAM_IGNORE;
    }
    pid_t host = getpid(), prompting = getpgrp();
    pid_t watcher = fork();
    if (watcher == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != host) _exit(0);
        close(pipes[0]);
        watch_finger(options, user, &offered_request, &verify_request, tty, prompting, pipes[1]);
        _exit(0);
    }
    close(pipes[1]);
    frees_wiped(&offered_request);
    frees_wiped(&verify_request);
    if (watcher < 0) {
        close(pipes[0]);
        close(tty);
        return PAM_IGNORE;
    }
    unsigned char answer = 0;
    struct pollfd wait_for = {.fd = pipes[0], .events = POLLIN};
    int ready;
    do ready = poll(&wait_for, 1, (options->timeout + 2) * 1000);
    while (ready < 0 && errno == EINTR);
    if (ready <= 0 || read(pipes[0], &answer, 1) != 1 || answer != 'O') {
        stop_watcher(watcher);
        close(pipes[0]);
        close(tty);
        if (options->debug) pam_syslog(pamh, LOG_DEBUG, "auth: no finger offered to %s by localauthd", name);
        return PAM_IGNORE;
    }
    char *response = NULL;
    int asked = pam_prompt(pamh, PAM_PROMPT_ECHO_OFF, &response, "Password or finger: ");
    stop_watcher(watcher);
    int matched = 0;
    ssize_t got;
    while ((got = read(pipes[0], &answer, 1)) == 1 || (got < 0 && errno == EINTR))
        if (got == 1 && answer == 'M') matched = 1;
    close(pipes[0]);
    if (matched) {
        /* The newline that ended the prompt stays in the input when the prompt ended otherwise first. */
        tcflush(tty, TCIFLUSH);
        close(tty);
        if (response) {
            wipe(response, strlen(response));
            free(response);
        }
        pam_syslog(pamh, LOG_INFO, "auth: %s authenticated by a finger", name);
        /* For the session step: the login was by finger (it says so when the keychain stays locked). */
        char *fingered = strdup(name);
        if (fingered && pam_set_data(pamh, FINGER_DATA_NAME, fingered, cleanup_text) != PAM_SUCCESS) free(fingered);
        return PAM_SUCCESS;
    }
    close(tty);
    if (asked != PAM_SUCCESS || !response) return PAM_CONV_ERR;
    int set = pam_set_item(pamh, PAM_AUTHTOK, response);
    wipe(response, strlen(response));
    free(response);
    return set == PAM_SUCCESS ? PAM_IGNORE : set;
}

EXPORT int pam_sm_authenticate(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    (void)flags;
    struct options options;
    parse_options(argc, argv, &options);
    /* A finger of an earlier authentication in this handle says nothing about this one. */
    pam_set_data(pamh, FINGER_DATA_NAME, NULL, NULL);
    if (options.finger) {
        int result = finger_or_password(pamh, &options);
        if (result != PAM_IGNORE) return result;
    }
    const void *token = NULL, *user = NULL;
    if (pam_get_item(pamh, PAM_AUTHTOK, &token) != PAM_SUCCESS || !token ||
        pam_get_item(pamh, PAM_USER, &user) != PAM_SUCCESS || !user) {
        if (options.debug) pam_syslog(pamh, LOG_DEBUG, "auth: no password in the stack to keep");
        return PAM_IGNORE;
    }
    struct kept *copy = calloc(1, sizeof *copy);
    if (copy) {
        copy->user = strdup(user);
        copy->password = strdup(token);
    }
    if (!copy || !copy->user || !copy->password ||
        pam_set_data(pamh, DATA_NAME, copy, cleanup_kept) != PAM_SUCCESS) {
        if (copy) cleanup_kept(pamh, copy, 0);
        pam_syslog(pamh, LOG_ERR, "auth: cannot keep the password for the session");
    } else if (options.debug) {
        pam_syslog(pamh, LOG_DEBUG, "auth: password kept for the session");
    }
    return PAM_IGNORE;
}

EXPORT int pam_sm_setcred(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    (void)pamh, (void)flags, (void)argc, (void)argv;
    return PAM_IGNORE;
}

EXPORT int pam_sm_open_session(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    (void)flags;
    struct options options;
    parse_options(argc, argv, &options);
    const void *data = NULL, *user = NULL;
    if (pam_get_data(pamh, DATA_NAME, &data) != PAM_SUCCESS) data = NULL;
    const struct kept *kept = data;
    const char *password = kept ? kept->password : NULL;
    /* Only to the user who gave it: a program may authenticate one user and open the session of another (sudo
     * authenticates the caller, then opens the target user's session), and that user's keychain must not be tried
     * with the first one's password. */
    if (pam_get_item(pamh, PAM_USER, &user) != PAM_SUCCESS) user = NULL;
    if (password && (!user || strcmp(user, kept->user) != 0)) {
        pam_syslog(pamh, LOG_NOTICE, "session: opened for %s after %s authenticated: no password handed over",
                   user ? (const char *)user : "?", kept->user);
        password = NULL;
    }
    const char *name = "?";
    struct outcome outcome;
    ask(pamh, &options, 1, password, NULL, &name, &outcome);
    /* Used or not, the kept copy is wiped and freed now (pam_set_data runs the old cleanup). */
    if (kept) pam_set_data(pamh, DATA_NAME, NULL, NULL);
    /* A login by finger opens a locked keychain only within 48 hours of a passcode unlock since localauthd started
     * (localauthd opens it now, for this program's finger, and counts the session): otherwise the user learns here
     * that it is locked. */
    const void *fingered = NULL;
    if (pam_get_data(pamh, FINGER_DATA_NAME, &fingered) != PAM_SUCCESS || !fingered || !user ||
        strcmp(user, fingered) != 0)
        fingered = NULL;
    if (!password && fingered && outcome.status == 0 && !outcome.unlocked)
        pam_info(pamh, "The login keychain is locked: a finger opens it only within 48 hours of an unlock by password "
                       "since localauthd started. `lactl keychain unlock` opens it.");
    report(pamh, &options, name, &outcome,
           password ? "session open" : (fingered ? "session open (by finger)" : "session open (no password)"));
    return PAM_SUCCESS;
}

EXPORT int pam_sm_close_session(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    (void)flags;
    struct options options;
    parse_options(argc, argv, &options);
    const char *name = "?";
    struct outcome outcome;
    ask(pamh, &options, 2, NULL, NULL, &name, &outcome);
    report(pamh, &options, name, &outcome, "session close");
    return PAM_SUCCESS;
}

EXPORT int pam_sm_chauthtok(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    if (!(flags & PAM_UPDATE_AUTHTOK)) return PAM_IGNORE;
    struct options options;
    parse_options(argc, argv, &options);
    const void *old = NULL, *new = NULL, *user = NULL;
    pam_get_item(pamh, PAM_OLDAUTHTOK, &old);
    pam_get_item(pamh, PAM_AUTHTOK, &new);
    if (!old || !new) {
        pam_get_item(pamh, PAM_USER, &user);
        pam_syslog(pamh, LOG_NOTICE,
                   "password: the keychain of %s stays sealed under the previous password (the stack gave no old "
                   "password); `lactl passcode changed` re-seals it",
                   user ? (const char *)user : "?");
        return PAM_IGNORE;
    }
    const char *name = "?";
    struct outcome outcome;
    ask(pamh, &options, 3, old, new, &name, &outcome);
    report(pamh, &options, name, &outcome, "password change");
    return PAM_IGNORE;
}
