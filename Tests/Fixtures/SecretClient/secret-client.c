/* secret-client store LABEL SECRET KEY VALUE | lookup KEY VALUE | clear KEY VALUE
 *
 * A program on libsecret's synchronous C API, as a GNOME application keeps a password: its own schema
 * (org.example.SecretClient, one string attribute), the default collection. Prints the password found by lookup,
 * "cleared" or "stored"; exits 1 with libsecret's message on an error, 2 when lookup finds nothing.
 * Built by SecretServiceTests: cc secret-client.c $(pkg-config --cflags --libs libsecret-1). */
#include <libsecret/secret.h>
#include <stdio.h>
#include <string.h>

static const SecretSchema schema = {
    "org.example.SecretClient", SECRET_SCHEMA_NONE, {{"key", SECRET_SCHEMA_ATTRIBUTE_STRING}, {NULL, 0}}};

static int fail(GError *error) {
    fprintf(stderr, "secret-client: %s\n", error->message);
    g_error_free(error);
    return 1;
}

int main(int argc, char **argv) {
    GError *error = NULL;
    if (argc == 6 && strcmp(argv[1], "store") == 0) {
        if (!secret_password_store_sync(&schema, SECRET_COLLECTION_DEFAULT, argv[2], argv[3], NULL, &error, "key",
                                        argv[5], NULL))
            return fail(error);
        printf("stored\n");
        return 0;
    }
    if (argc == 4 && strcmp(argv[1], "lookup") == 0) {
        gchar *password = secret_password_lookup_sync(&schema, NULL, &error, "key", argv[3], NULL);
        if (error) return fail(error);
        if (!password) return 2;
        printf("%s\n", password);
        secret_password_free(password);
        return 0;
    }
    if (argc == 4 && strcmp(argv[1], "clear") == 0) {
        if (!secret_password_clear_sync(&schema, NULL, &error, "key", argv[3], NULL) && error) return fail(error);
        printf("cleared\n");
        return 0;
    }
    fprintf(stderr, "usage: secret-client store LABEL SECRET key VALUE | lookup key VALUE | clear key VALUE\n");
    return 2;
}
