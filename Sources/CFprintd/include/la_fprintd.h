#ifndef LA_FPRINTD_H
#define LA_FPRINTD_H

// A small synchronous client of fprintd (net.reactivated.Fprint on the system bus), written against GDBus so that
// Swift calls plain C functions: no variadic GVariant builders, no GLib main loop in the caller. Every function
// that fails returns -1 (or NULL) and sets *error to a message and *error_name to the D-Bus error's name (either may
// be NULL when not wanted); free both with la_fprintd_free.

typedef struct la_fprintd la_fprintd;

/// Connects to `address`, or to the system bus when NULL (DBUS_SYSTEM_BUS_ADDRESS honoured). The connection is not
/// the process-wide shared one and never exits the process when the bus goes away.
la_fprintd *la_fprintd_open(const char *address, char **error);
void la_fprintd_close(la_fprintd *client);

/// 1 when net.reactivated.Fprint has an owner on the bus or can be activated there, 0 when not, -1 on error.
int la_fprintd_present(la_fprintd *client, char **error);

/// The default device: its object path, name and number of enroll stages.
int la_fprintd_default_device(
    la_fprintd *client, char **path, char **name, int *enroll_stages, char **error_name, char **error);

/// The finger names `user` has enrolled on `device`, a NULL-terminated array (free with la_fprintd_free_strv); an
/// empty array when none (fprintd's NoEnrolledPrints).
int la_fprintd_enrolled_fingers(
    la_fprintd *client, const char *device, const char *user, char ***fingers, char **error_name, char **error);

/// Called with each status fprintd reports before the final one (a retry, an enroll stage).
typedef void (*la_fprintd_progress)(void *context, const char *status);

/// Claims `device` for `user` (retrying a few times while another client's claim is being released), starts a
/// verification of `finger` ("any": every enrolled finger the device can identify) or an enrollment of it, and
/// waits for the final status, which it returns in *status ("verify-match", "enroll-completed", ...). Gives up after
/// `timeout_ms` (*status "timeout") or as soon as *cancel is nonzero (*status "cancelled"). Stops the operation and
/// releases the device on every path, the final status included.
int la_fprintd_run(
    la_fprintd *client, const char *device, const char *user, int enroll, const char *finger, int timeout_ms,
    const volatile int *cancel, la_fprintd_progress progress, void *context, char **status, char **error_name,
    char **error);

/// Deletes `user`'s print of `finger` on `device`, or every print of the user when `finger` is NULL (claiming
/// and releasing the device around it).
int la_fprintd_delete(
    la_fprintd *client, const char *device, const char *user, const char *finger, char **error_name, char **error);

void la_fprintd_free(void *pointer);
void la_fprintd_free_strv(char **strings);

#endif
