/*
 * pam-session-driver: a login program for tests. It runs one PAM handle (pam_start_confdir, so the stack comes from
 * a test's directory) and obeys commands read from standard input, one per line, printing one result line each:
 *
 *   password TEXT   queue TEXT as the next answer to a question asked without echo   -> "password queued"
 *   authenticate    pam_authenticate, then pam_acct_mgmt when it succeeded             -> "authenticate RC TEXT"
 *   open            pam_setcred(ESTABLISH), then pam_open_session's result              -> "open RC TEXT"
 *   close           pam_close_session, pam_setcred(DELETE)                              -> "close RC TEXT"
 *   chauthtok       pam_chauthtok                                                       -> "chauthtok RC TEXT"
 *   end (or EOF)    pam_end, exit 0                                                     -> "end 0"
 *
 * Hooks for the tests, resolved because the driver is linked with -rdynamic:
 *   pam_localauth_wiped   the module calls it on each buffer that held a password, after wiping it and before
 *                         freeing it: prints "wiped LENGTH zero=yes|no"
 *   __syslog_chk, syslog  what pam_syslog would send to the system log goes to standard error as "syslog PRI TEXT"
 *
 * Usage: pam-session-driver --confdir DIR SERVICE USER
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include <security/pam_appl.h>

#define QUEUE_LIMIT 16

static char *queue[QUEUE_LIMIT];
static int queued;

void pam_localauth_wiped(const void *region, size_t length) {
    const unsigned char *bytes = region;
    int zero = 1;
    for (size_t i = 0; i < length; i++) zero &= bytes[i] == 0;
    printf("wiped %zu zero=%s\n", length, zero ? "yes" : "no");
    fflush(stdout);
}

static void log_line(int priority, const char *format, va_list arguments) {
    fprintf(stderr, "syslog %d ", priority & LOG_PRIMASK);
    vfprintf(stderr, format, arguments);
    fputc('\n', stderr);
    fflush(stderr);
}

void __syslog_chk(int priority, int flag, const char *format, ...) {
    (void)flag;
    va_list arguments;
    va_start(arguments, format);
    log_line(priority, format, arguments);
    va_end(arguments);
}

void syslog(int priority, const char *format, ...) {
    va_list arguments;
    va_start(arguments, format);
    log_line(priority, format, arguments);
    va_end(arguments);
}

static int converse(int count, const struct pam_message **messages, struct pam_response **responses, void *user) {
    struct pam_response *answers = calloc((size_t)count, sizeof *answers);
    if (!answers) return PAM_BUF_ERR;
    for (int i = 0; i < count; i++) {
        switch (messages[i]->msg_style) {
        case PAM_PROMPT_ECHO_OFF:
            if (queued == 0) {
                for (int j = 0; j < i; j++) free(answers[j].resp);
                free(answers);
                return PAM_CONV_ERR;
            }
            answers[i].resp = queue[0];
            memmove(queue, queue + 1, sizeof queue[0] * (size_t)--queued);
            break;
        case PAM_PROMPT_ECHO_ON:
            answers[i].resp = strdup(user);
            break;
        default:
            printf("message %s\n", messages[i]->msg);
            fflush(stdout);
        }
    }
    *responses = answers;
    return PAM_SUCCESS;
}

int main(int argc, char **argv) {
    if (argc != 5 || strcmp(argv[1], "--confdir") != 0) {
        fprintf(stderr, "usage: pam-session-driver --confdir DIR SERVICE USER\n");
        return 2;
    }
    struct pam_conv conversation = {converse, argv[4]};
    pam_handle_t *pamh = NULL;
    int status = pam_start_confdir(argv[3], argv[4], &conversation, argv[2], &pamh);
    if (status != PAM_SUCCESS) {
        fprintf(stderr, "pam_start_confdir: %d\n", status);
        return 1;
    }
    char line[1024];
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = 0;
        const char *command = line;
        if (strncmp(line, "password ", 9) == 0) {
            if (queued < QUEUE_LIMIT) queue[queued++] = strdup(line + 9);
            memset(line, 0, sizeof line);
            printf("password queued\n");
            fflush(stdout);
            continue;
        } else if (strcmp(line, "authenticate") == 0) {
            status = pam_authenticate(pamh, 0);
            if (status == PAM_SUCCESS) status = pam_acct_mgmt(pamh, 0);
        } else if (strcmp(line, "open") == 0) {
            /* The session's own result, whatever pam_setcred said (pam_unix repeats a failed authentication). */
            (void)pam_setcred(pamh, PAM_ESTABLISH_CRED);
            status = pam_open_session(pamh, 0);
        } else if (strcmp(line, "close") == 0) {
            status = pam_close_session(pamh, 0);
            int deleted = pam_setcred(pamh, PAM_DELETE_CRED);
            if (status == PAM_SUCCESS) status = deleted;
        } else if (strcmp(line, "chauthtok") == 0) {
            status = pam_chauthtok(pamh, 0);
        } else if (strncmp(line, "user ", 5) == 0) {
            /* As sudo does between authenticating its caller and opening the target user's session. */
            status = pam_set_item(pamh, PAM_USER, line + 5);
            command = "user";
        } else if (strcmp(line, "end") == 0) {
            break;
        } else {
            printf("unknown %s\n", line);
            fflush(stdout);
            continue;
        }
        printf("%s %d %s\n", command, status, pam_strerror(pamh, status));
        fflush(stdout);
    }
    pam_end(pamh, status);
    for (int i = 0; i < queued; i++) {
        memset(queue[i], 0, strlen(queue[i]));
        free(queue[i]);
    }
    printf("end 0\n");
    fflush(stdout);
    return 0;
}
