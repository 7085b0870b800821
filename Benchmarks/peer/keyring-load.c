// The peer for `la-bench load`: one client process of the same 90/5/4/1 find/add/update/delete mix, run against
// gnome-keyring through libsecret's synchronous password functions instead of against localauthd. Benchmarks/peer/
// keyring-load starts the bus and the keyring daemon, and many of these at once.
//
//   keyring-load INDEX START SECONDS   one client: connects and opens its Secret Service session, sleeps until START
//                                      (seconds since the epoch, a double, the same for every client of a count),
//                                      then runs the mix until START + SECONDS
//   keyring-load populate COUNT        adds the items the finds look up (account-0 … account-COUNT-1), then exits
//
// The items are generic passwords as in la-bench: service "la-bench-load", account "account-<i>", secret "correct
// horse battery staple". Finds (90%) look up a random one of the 1,000 by service and account and check the secret.
// Adds (5%), updates (4%) and deletes (1%) touch only the client's own items, "client-<run>-<index>-<n>", where
// <run> is START's whole seconds, so that clients never collide and no count adds a name an earlier count left. An
// update stores again, with a new secret, the newest of the client's items that still exists (libsecret's store
// replaces an item with the same attributes); a delete clears that newest item. A client with no item of its own
// (none added yet, or all deleted), which at 256 clients is most of them for most of the run, does what la-bench's
// client then gets from localauthd, a search that finds nothing: an update looks up a name that does not exist
// (libsecret has no update that fails on a missing item; a store would add it), and a delete clears one.
//
// Output, on standard output: a first line `ops N errors N`, then the latency of every operation in nanoseconds
// (CLOCK_MONOTONIC), one a line, in the order they ran. An operation that fails, or a find that does not return the
// secret, counts as an error; the first few errors' messages go to standard error, and so does `late MS` when the
// client reached the wait after START (its run is then shorter; it still stops at START + SECONDS).
//
// The default collection must exist and be unlocked: a locked one would make gnome-keyring ask for a password
// through a prompter, which on a machine without a display fails or waits, so the client refuses to run instead.
#define _GNU_SOURCE
#include <libsecret/secret.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *const service_name = "la-bench-load";
static const char *const find_secret = "correct horse battery staple";
enum { find_items = 1000, errors_reported = 5 };

// Matches by the two attributes alone (and the schema's name, which libsecret adds as xdg:schema).
static const SecretSchema schema = {
    "org.localauthentication.LaBenchLoad",
    SECRET_SCHEMA_NONE,
    {
        {"service", SECRET_SCHEMA_ATTRIBUTE_STRING},
        {"account", SECRET_SCHEMA_ATTRIBUTE_STRING},
        {NULL, 0},
    },
    0, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
};

static uint64_t monotonic_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static double realtime_seconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

// xorshift64*: a generator of the process's own, so that the choice of operation costs nothing next to D-Bus.
static uint64_t random_state;
static uint32_t random_below(uint32_t bound) {
    random_state ^= random_state >> 12;
    random_state ^= random_state << 25;
    random_state ^= random_state >> 27;
    return (uint32_t)((random_state * 2685821657736338717ull) >> 32) % bound;
}

static int errors_printed;
static void note_error(const char *what, GError *error) {
    if (errors_printed < errors_reported) {
        // No error but the wrong answer: a find with no secret or another one, an update that found a missing name.
        fprintf(stderr, "error %s: %s\n", what, error ? error->message : "wrong answer");
        errors_printed++;
    }
    g_clear_error(&error);
}

static gboolean store(const char *account, const char *secret, GError **error) {
    char label[128];
    snprintf(label, sizeof label, "%s %s", service_name, account);
    return secret_password_store_sync(
        &schema, SECRET_COLLECTION_DEFAULT, label, secret, NULL, error, "service", service_name, "account", account,
        NULL);
}

// Connects, opens the session (the key exchange) and checks the default collection, all before any timing starts.
static SecretService *connect_unlocked(void) {
    GError *error = NULL;
    SecretService *service = secret_service_get_sync(SECRET_SERVICE_OPEN_SESSION, NULL, &error);
    if (!service) {
        fprintf(stderr, "keyring-load: no Secret Service: %s\n", error->message);
        return NULL;
    }
    SecretCollection *collection =
        secret_collection_for_alias_sync(service, SECRET_COLLECTION_DEFAULT, SECRET_COLLECTION_NONE, NULL, &error);
    if (!collection) {
        fprintf(stderr, "keyring-load: no default collection: %s\n", error ? error->message : "the alias is unset");
        g_clear_error(&error);
        g_object_unref(service);
        return NULL;
    }
    gboolean locked = secret_collection_get_locked(collection);
    g_object_unref(collection);
    if (locked) {
        fprintf(stderr, "keyring-load: the default collection is locked; a prompt would be needed\n");
        g_object_unref(service);
        return NULL;
    }
    return service;
}

static int populate(long count) {
    SecretService *service = connect_unlocked();
    if (!service) return 1;
    for (long i = 0; i < count; i++) {
        char account[32];
        snprintf(account, sizeof account, "account-%ld", i);
        GError *error = NULL;
        if (!store(account, find_secret, &error)) {
            fprintf(stderr, "keyring-load: adding %s: %s\n", account, error->message);
            return 1;
        }
    }
    g_object_unref(service);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "populate") == 0) return populate(strtol(argv[2], NULL, 10));
    if (argc != 4) {
        fprintf(stderr, "usage: keyring-load INDEX START SECONDS | keyring-load populate COUNT\n");
        return 2;
    }
    long index = strtol(argv[1], NULL, 10);
    double start = strtod(argv[2], NULL), duration = strtod(argv[3], NULL);
    long run = (long)start;
    random_state = ((uint64_t)getpid() << 32) ^ monotonic_ns() ^ (uint64_t)index;
    if (random_state == 0) random_state = 1;

    SecretService *service = connect_unlocked();
    if (!service) {
        printf("ops 0 errors 1\n");
        return 1;
    }
    // The client's own items that exist, oldest first, by number; next_own is the number the next add takes.
    size_t own_capacity = 1024, own_count = 0;
    long *own = malloc(own_capacity * sizeof *own);
    long next_own = 1;
    char account[64], secret[64];
    GError *error = NULL;

    size_t capacity = 1 << 16, count = 0;
    uint64_t *latencies = malloc(capacity * sizeof *latencies);
    if (!own || !latencies) return 1;
    long errors = 0;

    // The end is START + SECONDS on the monotonic clock, wherever this client happens to be when START comes.
    double late = realtime_seconds() - start;
    if (late > 0) {
        fprintf(stderr, "late %.0f\n", late * 1e3);
    } else {
        struct timespec until = {(time_t)start, (long)((start - (double)(time_t)start) * 1e9)};
        while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &until, NULL) == EINTR) {}
        late = 0;
    }
    uint64_t end = monotonic_ns() + (uint64_t)((duration - late > 0 ? duration - late : 0) * 1e9);

    for (uint64_t began = monotonic_ns(); began < end; began = monotonic_ns()) {
        uint32_t choice = random_below(100);
        error = NULL;
        if (choice < 90) {
            snprintf(account, sizeof account, "account-%u", random_below(find_items));
            char *found = secret_password_lookup_sync(
                &schema, NULL, &error, "service", service_name, "account", account, NULL);
            if (!found || strcmp(found, find_secret) != 0) {
                errors++;
                note_error("find", error);
            }
            secret_password_free(found);
        } else if (choice < 95) {
            snprintf(account, sizeof account, "client-%ld-%ld-%ld", run, index, next_own);
            if (store(account, find_secret, &error)) {
                if (own_count == own_capacity) {
                    own_capacity *= 2;
                    own = realloc(own, own_capacity * sizeof *own);
                    if (!own) return 1;
                }
                own[own_count++] = next_own;
            } else {
                errors++;
                note_error("add", error);
            }
            next_own++;
        } else if (choice < 99) {
            snprintf(account, sizeof account, "client-%ld-%ld-%ld", run, index, own_count ? own[own_count - 1] : 0);
            if (own_count) {
                snprintf(secret, sizeof secret, "updated %lu", (unsigned long)began);
                if (!store(account, secret, &error)) {
                    errors++;
                    note_error("update", error);
                }
            } else {
                char *found = secret_password_lookup_sync(
                    &schema, NULL, &error, "service", service_name, "account", account, NULL);
                if (found || error) {
                    errors++;
                    note_error("update", error);
                }
                secret_password_free(found);
            }
        } else {
            snprintf(account, sizeof account, "client-%ld-%ld-%ld", run, index, own_count ? own[own_count - 1] : 0);
            // False with no error is "nothing matched", which only happens for the name that does not exist.
            secret_password_clear_sync(&schema, NULL, &error, "service", service_name, "account", account, NULL);
            if (error) {
                errors++;
                note_error("delete", error);
            } else if (own_count) {
                own_count--;
            }
        }
        uint64_t elapsed = monotonic_ns() - began;
        if (count == capacity) {
            capacity *= 2;
            latencies = realloc(latencies, capacity * sizeof *latencies);
            if (!latencies) return 1;
        }
        latencies[count++] = elapsed;
    }

    static char buffer[1 << 16];
    setvbuf(stdout, buffer, _IOFBF, sizeof buffer);
    printf("ops %zu errors %ld\n", count, errors);
    for (size_t i = 0; i < count; i++) printf("%lu\n", (unsigned long)latencies[i]);
    fflush(stdout);
    g_object_unref(service);
    return 0;
}
