// A D-Bus service endpoint over GDBus for the Secret Service provider (lactl secret-service): one connection to a
// message bus, the well-known name it owns, and the method calls addressed to it, answered in order: on GDBus's
// worker thread by an answerer when it can, otherwise queued for one thread to take. Replies, errors and signals may
// be sent from any thread. No variadic GVariant call reaches Swift.
#ifndef LA_SECRET_BUS_H
#define LA_SECRET_BUS_H

#include <gio/gio.h>

typedef struct la_secret_bus la_secret_bus;

// Connects to the bus at `address` (NULL: the session bus of DBUS_SESSION_BUS_ADDRESS); NULL with *error set.
la_secret_bus *la_secret_bus_open(const char *address, char **error);

// Asks for `name`, allowing a later --replace to take it: 1 owned; 0 another connection owns it (its unique name in
// *owner, its process id in *owner_pid, 0 when unknown); -1 with *error. With `replace`, takes it from an owner that
// allows replacement.
int la_secret_bus_own(la_secret_bus *bus, const char *name, int replace, char **owner, guint32 *owner_pid,
                      char **error);

// Starts queuing the method calls addressed to this connection (and the loss of the name) for la_secret_bus_next.
void la_secret_bus_start(la_secret_bus *bus);

// The next method call (a reference the caller releases with g_object_unref), waiting up to `timeout_ms`; NULL on
// timeout, or once the name was lost or the connection closed (then la_secret_bus_ended says why).
GDBusMessage *la_secret_bus_next(la_secret_bus *bus, int timeout_ms);

// Tells the bus that the method call la_secret_bus_next returned has been answered: calls that come meanwhile are
// queued behind it, and from then on may be answered on the worker thread again.
void la_secret_bus_done(la_secret_bus *bus);

// Makes a waiting la_secret_bus_next return NULL now (from any thread): a call answered elsewhere has finished.
void la_secret_bus_wake(la_secret_bus *bus);

// Keeps the worker thread from answering (as a queued call does) until la_secret_bus_done, once an answer it has
// under way has finished: the taker then answers calls it kept itself, never beside the worker.
void la_secret_bus_hold(la_secret_bus *bus);

// Answers a method call on GDBus's worker thread, where nothing may wait for the bus (a call to it would wait for
// this very thread): 1 when it replied (the call is dropped), 0 to have it queued for la_secret_bus_next instead. Runs
// only while no queued call waits or is being answered, so calls keep their order and it never runs beside the
// taker's answers.
typedef int (*la_secret_bus_answerer)(void *context, GDBusMessage *call);

// Has `answerer` (with `context`) offered each method call first, from now on; NULL stops it, once an answer under
// way has finished.
void la_secret_bus_answer_on_worker(la_secret_bus *bus, la_secret_bus_answerer answerer, void *context);

// Why the bus ended: NULL while it serves.
const char *la_secret_bus_ended(la_secret_bus *bus);

// Replies to `call` with `body` (a tuple, or NULL for none; a floating reference is taken). 0, or -1.
int la_secret_bus_reply(la_secret_bus *bus, GDBusMessage *call, GVariant *body);

// Replies to `call` with the D-Bus error `name` and `text`.
int la_secret_bus_fail(la_secret_bus *bus, GDBusMessage *call, const char *name, const char *text);

// Emits signal `member` of `interface` from `path` with `body` (a tuple or NULL; a floating reference is taken).
int la_secret_bus_emit(la_secret_bus *bus, const char *path, const char *interface, const char *member,
                       GVariant *body);

// The process id of the connection `sender` (GetConnectionUnixProcessID), 0 when unknown.
guint32 la_secret_bus_sender_pid(la_secret_bus *bus, const char *sender);

// Whether `name` has an owner on the bus (NameHasOwner): 1 yes, 0 no, -1 when the bus did not answer.
int la_secret_bus_name_has_owner(la_secret_bus *bus, const char *name);

// Calls `method` of `interface` at `path` of the connection `destination` with `parameters` (a tuple, or NULL for
// none; a floating reference is taken), waiting up to 25 s: the reply's body (a tuple the caller releases with
// g_variant_unref), or NULL with *error set (the D-Bus error's name and text). For a client of another provider.
GVariant *la_secret_bus_call(la_secret_bus *bus, const char *destination, const char *path, const char *interface,
                             const char *method, GVariant *parameters, char **error);

// This connection's unique name.
const char *la_secret_bus_unique_name(la_secret_bus *bus);

void la_secret_bus_close(la_secret_bus *bus);

// GVariant helpers whose GLib forms are macros or variadic: a type from its string, and the type string of a value.
const GVariantType *la_variant_type(const char *type);

#endif
