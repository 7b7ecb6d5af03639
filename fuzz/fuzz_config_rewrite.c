// fuzz-sources: src/server/base/config.c src/server/base/resp.c src/server/base/util.c
// fuzz-sources: src/web/glob.c -Isrc/web
// fuzz-sources: src/server/base/log.c src/server/base/fdlimit.c
/* libFuzzer target for CONFIG SET -> CONFIG REWRITE -> restart
 * (src/server/base/config.c). The input is records [how|index][name
 * length][name][value length][value]: the setting the name names, or
 * without one (length 0, or no setting's) the index's (low six bits, in
 * CONFIG GET *'s order), so seeds stay on their setting when the table
 * grows; the top two bits say how the value arrives: CONFIG SET, a config
 * file's single argument, the server's own config_set_str (REPLICAOF), or
 * a file's line of several words. Whatever was accepted is rewritten into a config file;
 * a fresh state must load that file and show every setting exactly as
 * before, or the run aborts: a value the rewrite cannot carry (a planted
 * line, a lost quote, a cut value) is a finding.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../src/server/base/config.h"

#define MAX_NAMES 128

static const char *names[MAX_NAMES];
static size_t nnames;
static char path[256];

static void add_name(void *ctx, const char *name)
{
    (void)ctx;
    if (nnames < MAX_NAMES)
        names[nnames++] = name;
}

static char dir[200];

static void remove_dir(void)
{
    unlink(path);
    rmdir(dir);
}

static void init_once(void)
{
    if (path[0])
        return;
    /* The rewrite fsyncs: on tmpfs that costs nothing. */
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(dir, sizeof(dir), "%s/fuzz-config-rewrite-XXXXXX", base);
    if (mkdtemp(dir) == NULL)
        abort();
    snprintf(path, sizeof(path), "%s/bloomery.conf", dir);
    atexit(remove_dir);
    config_init();
    config_match("*", 1, add_name, NULL);
    config_free();
    if (nnames == 0)
        abort();
}

static void write_empty(void)
{
    FILE *f = fopen(path, "w");
    if (f == NULL || fclose(f) != 0)
        abort();
}

/* One value, the way `how` says. Refusals are expected; crashes are not. */
static void apply(int how, const char *name, const uint8_t *v, size_t len)
{
    char err[256];
    err[0] = '\0';
    char *copy = malloc(len + 1);
    if (copy == NULL)
        return;
    memcpy(copy, v, len);
    copy[len] = '\0';
    const char *val = copy;
    switch (how) {
    case 0: { /* CONFIG SET name value */
        const char *argv[2] = {name, val};
        size_t lens[2] = {strlen(name), len};
        int bad = -1;
        if (config_set_pairs(1, argv, lens, &bad, err, sizeof(err)) == CONFIG_SET_FAILED &&
            (bad != 0 || err[0] == '\0'))
            abort(); /* a refusal names the pair and says why */
        break;
    }
    case 1: /* name "value" in the file, or --name value */
        if (!config_apply(name, 1, &val, &len, true, err, sizeof(err)) && err[0] == '\0')
            abort();
        break;
    case 2: /* the server's own update (REPLICAOF's "host port") */
        config_set_str(name, val);
        break;
    default: { /* name w1 w2 ... : the value cut at spaces */
        const char *w[64];
        size_t l[64];
        int n = 0;
        for (char *p = copy, *end = copy + len; p <= end && n < 64;) {
            char *sp = memchr(p, ' ', (size_t)(end - p));
            w[n] = p;
            l[n++] = sp ? (size_t)(sp - p) : (size_t)(end - p);
            if (sp == NULL)
                break;
            p = sp + 1;
        }
        if (!config_apply(name, n, w, l, true, err, sizeof(err)) && err[0] == '\0')
            abort();
        break;
    }
    }
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    init_once();
    write_empty();
    config_init();
    char err[512];
    if (!config_load_file(path, err, sizeof(err)))
        abort(); /* an empty file, only to name the file CONFIG REWRITE writes */
    for (size_t i = 0; i < size;) {
        int how = data[i] >> 6;
        const char *name = names[(data[i] & 63) % nnames];
        i++;
        size_t nlen = i < size ? data[i++] : 0;
        if (nlen > size - i)
            nlen = size - i;
        for (size_t k = 0; nlen && k < nnames; k++)
            if (strlen(names[k]) == nlen && memcmp(names[k], data + i, nlen) == 0)
                name = names[k];
        i += nlen;
        size_t len = i < size ? data[i++] : 0;
        if (len > size - i)
            len = size - i;
        apply(how, name, data + i, len);
        i += len;
    }
    char *before[MAX_NAMES];
    for (size_t k = 0; k < nnames; k++) {
        before[k] = config_format_dup(names[k]);
        if (before[k] == NULL)
            abort();
    }
    if (config_rewrite(err, sizeof(err)) != CONFIG_REWRITE_OK) {
        fprintf(stderr, "CONFIG REWRITE failed: %s\n", err);
        abort();
    }
    /* A restart: fresh settings, then the rewritten file. */
    config_free();
    config_init();
    if (!config_load_file(path, err, sizeof(err))) {
        fprintf(stderr, "the rewritten file does not load: %s\n", err);
        abort();
    }
    for (size_t k = 0; k < nnames; k++) {
        char *after = config_format_dup(names[k]);
        if (after == NULL || strcmp(before[k], after) != 0) {
            fprintf(stderr, "%s was '%s', reads back as '%s'\n", names[k], before[k],
                    after ? after : "(null)");
            abort();
        }
        free(after);
        free(before[k]);
    }
    config_free();
    return 0;
}
