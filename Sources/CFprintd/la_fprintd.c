// fprintd's D-Bus API (net.reactivated.Fprint, fprintd 1.94) through GDBus, synchronously. What this relies on, as
// measured on Debian 12 (docs/notes/fprintd-private-bus.md):
// - A status signal may come before the reply to VerifyStart/EnrollStart: the signals are subscribed to first, on
//   a main context of the call's own, and every one counts.
// - After a final status the operation must be stopped (VerifyStop/EnrollStop) before the next one can start, and
//   fprintd has no verify timeout of its own: the timeout is ours.
// - A claim of a client that just went away is released asynchronously: Claim retries AlreadyInUse for a while.
// - fprintd broadcasts the statuses: they are filtered on the owner of net.reactivated.Fprint and the device path.
#include "la_fprintd.h"

#include <gio/gio.h>
#include <string.h>

#define FPRINT_NAME "net.reactivated.Fprint"
#define FPRINT_DEVICE "net.reactivated.Fprint.Device"
#define FPRINT_MANAGER_PATH "/net/reactivated/Fprint/Manager"
#define CALL_TIMEOUT_MS 25000

struct la_fprintd {
    GDBusConnection *connection;
};

static void set_error(char **error, char **error_name, GError *failure, const char *doing) {
    if (error_name) *error_name = NULL;
    if (failure && g_dbus_error_is_remote_error(failure)) {
        if (error_name) *error_name = g_dbus_error_get_remote_error(failure);
        g_dbus_error_strip_remote_error(failure);
    }
    if (error) *error = failure ? g_strdup_printf("%s: %s", doing, failure->message) : g_strdup(doing);
    if (failure) g_error_free(failure);
}

la_fprintd *la_fprintd_open(const char *address, char **error) {
    GError *failure = NULL;
    gchar *bus = address ? g_strdup(address) : g_dbus_address_get_for_bus_sync(G_BUS_TYPE_SYSTEM, NULL, &failure);
    if (!bus) {
        set_error(error, NULL, failure, "no system bus address");
        return NULL;
    }
    GDBusConnection *connection = g_dbus_connection_new_for_address_sync(
        bus, G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT | G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION, NULL,
        NULL, &failure);
    g_free(bus);
    if (!connection) {
        set_error(error, NULL, failure, "cannot connect to the system bus");
        return NULL;
    }
    g_dbus_connection_set_exit_on_close(connection, FALSE);
    la_fprintd *client = g_new0(la_fprintd, 1);
    client->connection = connection;
    return client;
}

void la_fprintd_close(la_fprintd *client) {
    if (!client) return;
    g_dbus_connection_close_sync(client->connection, NULL, NULL);
    g_object_unref(client->connection);
    g_free(client);
}

static GVariant *call(
    la_fprintd *client, const char *path, const char *interface, const char *method, GVariant *parameters,
    const char *reply_type, GError **failure) {
    return g_dbus_connection_call_sync(
        client->connection, strcmp(interface, "org.freedesktop.DBus") == 0 ? "org.freedesktop.DBus" : FPRINT_NAME,
        path, interface, method, parameters, reply_type ? G_VARIANT_TYPE(reply_type) : NULL,
        G_DBUS_CALL_FLAGS_NO_AUTO_START, CALL_TIMEOUT_MS, NULL, failure);
}

int la_fprintd_present(la_fprintd *client, char **error) {
    GError *failure = NULL;
    GVariant *reply = call(
        client, "/org/freedesktop/DBus", "org.freedesktop.DBus", "NameHasOwner", g_variant_new("(s)", FPRINT_NAME),
        "(b)", &failure);
    if (!reply) {
        set_error(error, NULL, failure, "cannot ask the bus for fprintd");
        return -1;
    }
    gboolean owned = FALSE;
    g_variant_get(reply, "(b)", &owned);
    g_variant_unref(reply);
    if (owned) return 1;
    reply = call(
        client, "/org/freedesktop/DBus", "org.freedesktop.DBus", "ListActivatableNames", NULL, "(as)", &failure);
    if (!reply) {
        set_error(error, NULL, failure, "cannot ask the bus for fprintd");
        return -1;
    }
    GVariantIter *names = NULL;
    const gchar *name = NULL;
    int activatable = 0;
    g_variant_get(reply, "(as)", &names);
    while (g_variant_iter_next(names, "&s", &name)) {
        if (strcmp(name, FPRINT_NAME) == 0) activatable = 1;
    }
    g_variant_iter_free(names);
    g_variant_unref(reply);
    return activatable;
}

static GVariant *property(la_fprintd *client, const char *path, const char *name, GError **failure) {
    GVariant *reply = call(
        client, path, "org.freedesktop.DBus.Properties", "Get", g_variant_new("(ss)", FPRINT_DEVICE, name), "(v)",
        failure);
    if (!reply) return NULL;
    GVariant *value = NULL;
    g_variant_get(reply, "(v)", &value);
    g_variant_unref(reply);
    return value;
}

int la_fprintd_default_device(
    la_fprintd *client, char **path, char **name, int *enroll_stages, char **error_name, char **error) {
    GError *failure = NULL;
    // Auto-start is allowed here only: the first call of a session may have to start fprintd.
    GVariant *reply = g_dbus_connection_call_sync(
        client->connection, FPRINT_NAME, FPRINT_MANAGER_PATH, "net.reactivated.Fprint.Manager", "GetDefaultDevice",
        NULL, G_VARIANT_TYPE("(o)"), G_DBUS_CALL_FLAGS_NONE, CALL_TIMEOUT_MS, NULL, &failure);
    if (!reply) {
        set_error(error, error_name, failure, "fprintd has no reader");
        return -1;
    }
    g_variant_get(reply, "(o)", path);
    g_variant_unref(reply);
    GVariant *value = property(client, *path, "name", &failure);
    if (!value) {
        set_error(error, error_name, failure, "cannot read the reader's name");
        g_free(*path);
        *path = NULL;
        return -1;
    }
    *name = g_variant_dup_string(value, NULL);
    g_variant_unref(value);
    value = property(client, *path, "num-enroll-stages", &failure);
    if (!value) {
        set_error(error, error_name, failure, "cannot read the reader's enroll stages");
        g_free(*path);
        g_free(*name);
        *path = *name = NULL;
        return -1;
    }
    *enroll_stages = g_variant_get_int32(value);
    g_variant_unref(value);
    return 0;
}

int la_fprintd_enrolled_fingers(
    la_fprintd *client, const char *device, const char *user, char ***fingers, char **error_name, char **error) {
    GError *failure = NULL;
    GVariant *reply =
        call(client, device, FPRINT_DEVICE, "ListEnrolledFingers", g_variant_new("(s)", user), "(as)", &failure);
    if (!reply) {
        if (failure && g_dbus_error_is_remote_error(failure)) {
            gchar *remote = g_dbus_error_get_remote_error(failure);
            int none = remote && strcmp(remote, "net.reactivated.Fprint.Error.NoEnrolledPrints") == 0;
            g_free(remote);
            if (none) {
                g_error_free(failure);
                *fingers = g_new0(char *, 1);
                return 0;
            }
        }
        set_error(error, error_name, failure, "cannot list the enrolled fingers");
        return -1;
    }
    g_variant_get(reply, "(^as)", fingers);
    g_variant_unref(reply);
    return 0;
}

/// Claims `device` for `user`; AlreadyInUse is retried for up to a second (a client that went away is released
/// by fprintd asynchronously).
static int claim(la_fprintd *client, const char *device, const char *user, char **error_name, char **error) {
    for (int attempt = 0;; attempt++) {
        GError *failure = NULL;
        GVariant *reply = call(client, device, FPRINT_DEVICE, "Claim", g_variant_new("(s)", user), NULL, &failure);
        if (reply) {
            g_variant_unref(reply);
            return 0;
        }
        gchar *remote = failure && g_dbus_error_is_remote_error(failure) ? g_dbus_error_get_remote_error(failure)
                                                                            : NULL;
        int busy = remote && strcmp(remote, "net.reactivated.Fprint.Error.AlreadyInUse") == 0;
        g_free(remote);
        if (!busy || attempt >= 20) {
            set_error(error, error_name, failure, "cannot claim the reader");
            return -1;
        }
        g_error_free(failure);
        g_usleep(50 * 1000);
    }
}

static void release(la_fprintd *client, const char *device) {
    GVariant *reply = call(client, device, FPRINT_DEVICE, "Release", NULL, NULL, NULL);
    if (reply) g_variant_unref(reply);
}

struct run_state {
    const char *device;
    la_fprintd_progress progress;
    void *context;
    char *final_status;
};

static void on_status(
    GDBusConnection *connection, const gchar *sender, const gchar *path, const gchar *interface, const gchar *signal,
    GVariant *parameters, gpointer data) {
    (void)connection, (void)sender, (void)interface, (void)signal;
    struct run_state *state = data;
    if (state->final_status || strcmp(path, state->device) != 0) return;
    if (!g_variant_is_of_type(parameters, G_VARIANT_TYPE("(sb)"))) return;
    const gchar *status = NULL;
    gboolean done = FALSE;
    g_variant_get(parameters, "(&sb)", &status, &done);
    if (done) {
        state->final_status = g_strdup(status);
    } else if (state->progress) {
        state->progress(state->context, status);
    }
}

static gboolean tick_done(gpointer data) {
    (void)data;
    return G_SOURCE_REMOVE;
}

int la_fprintd_run(
    la_fprintd *client, const char *device, const char *user, int enroll, const char *finger, int timeout_ms,
    const volatile int *cancel, la_fprintd_progress progress, void *context, char **status, char **error_name,
    char **error) {
    *status = NULL;
    if (claim(client, device, user, error_name, error) != 0) return -1;
    GMainContext *main_context = g_main_context_new();
    g_main_context_push_thread_default(main_context);
    struct run_state state = {device, progress, context, NULL};
    // Only the owner of net.reactivated.Fprint's statuses (GDBus follows the name's owner): no other client of the
    // bus can feed us one.
    guint subscription = g_dbus_connection_signal_subscribe(
        client->connection, FPRINT_NAME, FPRINT_DEVICE, enroll ? "EnrollStatus" : "VerifyStatus", device, NULL,
        G_DBUS_SIGNAL_FLAGS_NONE, on_status, &state, NULL);
    GError *failure = NULL;
    GVariant *reply = call(
        client, device, FPRINT_DEVICE, enroll ? "EnrollStart" : "VerifyStart", g_variant_new("(s)", finger), NULL,
        &failure);
    int result = 0;
    if (!reply) {
        set_error(error, error_name, failure, enroll ? "cannot start the enrollment" : "cannot start the verification");
        result = -1;
    } else {
        g_variant_unref(reply);
        // Ours, not fprintd's: the device now waits for a finger (fprintd sends no status until a scan).
        if (progress) progress(context, enroll ? "enroll-started" : "verify-started");
        gint64 deadline = g_get_monotonic_time() + (gint64)timeout_ms * 1000;
        while (!state.final_status) {
            if (cancel && *cancel) {
                state.final_status = g_strdup("cancelled");
                break;
            }
            if (g_get_monotonic_time() >= deadline) {
                state.final_status = g_strdup("timeout");
                break;
            }
            // Signals are dispatched here; the loop wakes at least every 20 ms to look at the cancel flag.
            GSource *tick = g_timeout_source_new(20);
            g_source_set_callback(tick, tick_done, NULL, NULL);
            g_source_attach(tick, main_context);
            g_main_context_iteration(main_context, TRUE);
            g_source_destroy(tick);
            g_source_unref(tick);
        }
        GVariant *stopped =
            call(client, device, FPRINT_DEVICE, enroll ? "EnrollStop" : "VerifyStop", NULL, NULL, NULL);
        if (stopped) g_variant_unref(stopped);
        *status = state.final_status;
    }
    g_dbus_connection_signal_unsubscribe(client->connection, subscription);
    while (g_main_context_iteration(main_context, FALSE)) {}
    g_main_context_pop_thread_default(main_context);
    g_main_context_unref(main_context);
    release(client, device);
    return result;
}

int la_fprintd_delete(
    la_fprintd *client, const char *device, const char *user, const char *finger, char **error_name, char **error) {
    if (claim(client, device, user, error_name, error) != 0) return -1;
    GError *failure = NULL;
    GVariant *reply = finger
        ? call(client, device, FPRINT_DEVICE, "DeleteEnrolledFinger", g_variant_new("(s)", finger), NULL, &failure)
        : call(client, device, FPRINT_DEVICE, "DeleteEnrolledFingers2", NULL, NULL, &failure);
    release(client, device);
    if (!reply) {
        set_error(error, error_name, failure, "cannot delete the print");
        return -1;
    }
    g_variant_unref(reply);
    return 0;
}

void la_fprintd_free(void *pointer) { g_free(pointer); }

void la_fprintd_free_strv(char **strings) { g_strfreev(strings); }
