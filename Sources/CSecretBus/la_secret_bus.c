// Definitions of la_secret_bus.h, which says what each is for.
#include "la_secret_bus.h"

#include <string.h>

#define DBUS_NAME "org.freedesktop.DBus"
#define DBUS_PATH "/org/freedesktop/DBus"
#define CALL_TIMEOUT_MS 25000

struct la_secret_bus {
    GDBusConnection *connection;
    GAsyncQueue *calls;
    guint filter;
    char *name;
    char *ended;
    GMutex lock;
    // The caller's answerer for calls it can answer on the worker thread, and its context, under answering: held
    // while an answer runs, so clearing the answerer waits for it.
    la_secret_bus_answerer answerer;
    void *answerer_context;
    GMutex answering;
    // Method calls queued and not yet done (la_secret_bus_done): while any is, every call is queued behind it.
    gint waiting;
};

static void set_error(char **error, GError *failure, const char *doing) {
    if (error) *error = failure ? g_strdup_printf("%s: %s", doing, failure->message) : g_strdup(doing);
    if (failure) g_error_free(failure);
}

la_secret_bus *la_secret_bus_open(const char *address, char **error) {
    GError *failure = NULL;
    gchar *bus = address ? g_strdup(address) : g_dbus_address_get_for_bus_sync(G_BUS_TYPE_SESSION, NULL, &failure);
    if (!bus) {
        set_error(error, failure, "no session bus (DBUS_SESSION_BUS_ADDRESS)");
        return NULL;
    }
    GDBusConnection *connection = g_dbus_connection_new_for_address_sync(
        bus, G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT | G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION, NULL,
        NULL, &failure);
    g_free(bus);
    if (!connection) {
        set_error(error, failure, "cannot connect to the session bus");
        return NULL;
    }
    g_dbus_connection_set_exit_on_close(connection, FALSE);
    la_secret_bus *result = g_new0(la_secret_bus, 1);
    result->connection = connection;
    result->calls = g_async_queue_new_full(g_object_unref);
    g_mutex_init(&result->lock);
    g_mutex_init(&result->answering);
    return result;
}

static GVariant *call_bus(la_secret_bus *bus, const char *method, GVariant *parameters, const char *reply_type,
                          GError **failure) {
    return g_dbus_connection_call_sync(bus->connection, DBUS_NAME, DBUS_PATH, DBUS_NAME, method, parameters,
                                       reply_type ? G_VARIANT_TYPE(reply_type) : NULL, G_DBUS_CALL_FLAGS_NONE,
                                       CALL_TIMEOUT_MS, NULL, failure);
}

guint32 la_secret_bus_sender_pid(la_secret_bus *bus, const char *sender) {
    GVariant *reply = call_bus(bus, "GetConnectionUnixProcessID", g_variant_new("(s)", sender), "(u)", NULL);
    if (!reply) return 0;
    guint32 pid = 0;
    g_variant_get(reply, "(u)", &pid);
    g_variant_unref(reply);
    return pid;
}

int la_secret_bus_name_has_owner(la_secret_bus *bus, const char *name) {
    GVariant *reply = call_bus(bus, "NameHasOwner", g_variant_new("(s)", name), "(b)", NULL);
    if (!reply) return -1;
    gboolean owned = FALSE;
    g_variant_get(reply, "(b)", &owned);
    g_variant_unref(reply);
    return owned ? 1 : 0;
}

int la_secret_bus_own(la_secret_bus *bus, const char *name, int replace, char **owner, guint32 *owner_pid,
                      char **error) {
    GError *failure = NULL;
    // ALLOW_REPLACEMENT (1), REPLACE_EXISTING (2), DO_NOT_QUEUE (4).
    guint32 flags = 1 | 4 | (replace ? 2 : 0);
    GVariant *reply = call_bus(bus, "RequestName", g_variant_new("(su)", name, flags), "(u)", &failure);
    if (!reply) {
        set_error(error, failure, "RequestName failed");
        return -1;
    }
    guint32 result = 0;
    g_variant_get(reply, "(u)", &result);
    g_variant_unref(reply);
    if (result == 1 || result == 4) {
        g_free(bus->name);
        bus->name = g_strdup(name);
        return 1;
    }
    if (owner) *owner = NULL;
    if (owner_pid) *owner_pid = 0;
    GVariant *found = call_bus(bus, "GetNameOwner", g_variant_new("(s)", name), "(s)", NULL);
    if (found) {
        const char *unique = NULL;
        g_variant_get(found, "(&s)", &unique);
        if (owner) *owner = g_strdup(unique);
        if (owner_pid) *owner_pid = la_secret_bus_sender_pid(bus, unique);
        g_variant_unref(found);
    }
    return 0;
}

static void end(la_secret_bus *bus, const char *why) {
    g_mutex_lock(&bus->lock);
    if (!bus->ended) bus->ended = g_strdup(why);
    g_mutex_unlock(&bus->lock);
    la_secret_bus_wake(bus);
}

// On GDBus's worker thread: method calls for us are queued (and consumed); NameLost for our name ends the service.
static GDBusMessage *filter(GDBusConnection *connection, GDBusMessage *message, gboolean incoming, gpointer data) {
    (void)connection;
    la_secret_bus *bus = data;
    if (!incoming) return message;
    GDBusMessageType type = g_dbus_message_get_message_type(message);
    if (type == G_DBUS_MESSAGE_TYPE_METHOD_CALL) {
        const char *destination = g_dbus_message_get_destination(message);
        const char *unique = g_dbus_connection_get_unique_name(bus->connection);
        int ours = destination == NULL || (unique && strcmp(destination, unique) == 0) ||
                   (bus->name && strcmp(destination, bus->name) == 0);
        if (!ours) return message;
        // Answered here only when nothing waits in the queue or is being answered (calls keep their order), and
        // the answerer takes it.
        if (g_atomic_int_get(&bus->waiting) == 0) {
            g_mutex_lock(&bus->answering);
            int answered = bus->answerer && bus->answerer(bus->answerer_context, message);
            g_mutex_unlock(&bus->answering);
            if (answered) {
                g_object_unref(message);
                return NULL;
            }
        }
        g_atomic_int_inc(&bus->waiting);
        g_async_queue_push(bus->calls, message);  // takes the reference the filter was given
        return NULL;
    }
    if (type == G_DBUS_MESSAGE_TYPE_SIGNAL && g_strcmp0(g_dbus_message_get_member(message), "NameLost") == 0 &&
        g_strcmp0(g_dbus_message_get_sender(message), DBUS_NAME) == 0) {
        GVariant *body = g_dbus_message_get_body(message);
        const char *lost = NULL;
        if (body && g_variant_is_of_type(body, G_VARIANT_TYPE("(s)"))) g_variant_get(body, "(&s)", &lost);
        if (lost && bus->name && strcmp(lost, bus->name) == 0) end(bus, "another program took the name over");
    }
    return message;
}

void la_secret_bus_start(la_secret_bus *bus) {
    bus->filter = g_dbus_connection_add_filter(bus->connection, filter, bus, NULL);
}

GDBusMessage *la_secret_bus_next(la_secret_bus *bus, int timeout_ms) {
    GDBusMessage *message = g_async_queue_timeout_pop(bus->calls, (guint64)timeout_ms * 1000);
    // The connection's "closed" signal comes only through a main loop, which nothing runs here.
    if (!message && g_dbus_connection_is_closed(bus->connection)) end(bus, "the bus connection closed");
    if (message && g_dbus_message_get_message_type(message) != G_DBUS_MESSAGE_TYPE_METHOD_CALL) {
        g_object_unref(message);
        return NULL;
    }
    return message;
}

void la_secret_bus_done(la_secret_bus *bus) { g_atomic_int_dec_and_test(&bus->waiting); }

void la_secret_bus_wake(la_secret_bus *bus) { g_async_queue_push(bus->calls, g_dbus_message_new()); }

void la_secret_bus_hold(la_secret_bus *bus) {
    g_atomic_int_inc(&bus->waiting);
    g_mutex_lock(&bus->answering);
    g_mutex_unlock(&bus->answering);
}

void la_secret_bus_answer_on_worker(la_secret_bus *bus, la_secret_bus_answerer answerer, void *context) {
    g_mutex_lock(&bus->answering);
    bus->answerer = answerer;
    bus->answerer_context = context;
    g_mutex_unlock(&bus->answering);
}

const char *la_secret_bus_ended(la_secret_bus *bus) {
    g_mutex_lock(&bus->lock);
    const char *why = bus->ended;
    g_mutex_unlock(&bus->lock);
    return why;
}

int la_secret_bus_reply(la_secret_bus *bus, GDBusMessage *call, GVariant *body) {
    GDBusMessage *reply = g_dbus_message_new_method_reply(call);
    if (body) g_dbus_message_set_body(reply, body);
    gboolean sent = g_dbus_connection_send_message(bus->connection, reply, G_DBUS_SEND_MESSAGE_FLAGS_NONE, NULL, NULL);
    g_object_unref(reply);
    return sent ? 0 : -1;
}

int la_secret_bus_fail(la_secret_bus *bus, GDBusMessage *call, const char *name, const char *text) {
    GDBusMessage *reply = g_dbus_message_new_method_error_literal(call, name, text);
    gboolean sent = g_dbus_connection_send_message(bus->connection, reply, G_DBUS_SEND_MESSAGE_FLAGS_NONE, NULL, NULL);
    g_object_unref(reply);
    return sent ? 0 : -1;
}

int la_secret_bus_emit(la_secret_bus *bus, const char *path, const char *interface, const char *member,
                       GVariant *body) {
    return g_dbus_connection_emit_signal(bus->connection, NULL, path, interface, member, body, NULL) ? 0 : -1;
}

GVariant *la_secret_bus_call(la_secret_bus *bus, const char *destination, const char *path, const char *interface,
                             const char *method, GVariant *parameters, char **error) {
    GError *failure = NULL;
    GVariant *reply = g_dbus_connection_call_sync(bus->connection, destination, path, interface, method, parameters,
                                                  NULL, G_DBUS_CALL_FLAGS_NONE, CALL_TIMEOUT_MS, NULL, &failure);
    if (!reply) {
        char *name = failure ? g_dbus_error_get_remote_error(failure) : NULL;
        if (failure) g_dbus_error_strip_remote_error(failure);
        char *doing = g_strdup_printf("%s.%s on %s%s%s%s", interface, method, path, name ? " (" : "",
                                      name ? name : "", name ? ")" : "");
        set_error(error, failure, doing);
        g_free(doing);
        g_free(name);
    }
    return reply;
}

const char *la_secret_bus_unique_name(la_secret_bus *bus) {
    return g_dbus_connection_get_unique_name(bus->connection);
}

void la_secret_bus_close(la_secret_bus *bus) {
    if (!bus) return;
    if (bus->filter) g_dbus_connection_remove_filter(bus->connection, bus->filter);
    g_dbus_connection_close_sync(bus->connection, NULL, NULL);
    g_object_unref(bus->connection);
    g_async_queue_unref(bus->calls);
    g_free(bus->name);
    g_free(bus->ended);
    g_mutex_clear(&bus->lock);
    g_mutex_clear(&bus->answering);
    g_free(bus);
}

const GVariantType *la_variant_type(const char *type) { return (const GVariantType *)type; }
