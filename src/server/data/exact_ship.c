/* The exact store in a full resync (exact.h): the master ships a
 * checkpoint of its store taken after the sync's snapshot, file by file;
 * the replica keeps what it receives under DIR/exact-files/<content hash>,
 * so a later full resync fetches only the files it lacks, and builds its
 * DIR/exact from them.
 *
 * The checkpoint holds at least everything below the snapshot's start (each
 * snapshot syncs the store first), maybe more: the log the replica replays
 * from the snapshot's start then writes some of it again, which puts and
 * period drops, applied in log order, absorb.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "datadir.h"
#include "datadir_fs.h"
#include "exact.h"
#include "exact_store.h"

#define SHIP_DIR "exact-ship"
#define RECV_DIR "exact-files"

/* Remove a directory of regular files (the store's and ours never hold
 * anything else); a missing one is fine. */
static bool rm_files_dir(const char *path)
{
    int dfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
        return errno == ENOENT;
    DIR *d = fdopendir(dfd);
    if (d == NULL) {
        close(dfd);
        return false;
    }
    bool ok = true;
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (unlinkat(dfd, de->d_name, 0) != 0)
            ok = false;
    }
    closedir(d);
    return ok && rmdir(path) == 0;
}

static bool hash_file(const char *path, uint64_t *size, chunk_hash *h)
{
    int fd = datadir_open_read(path);
    if (fd < 0)
        return false;
    XXH3_state_t *st = XXH3_createState();
    uint8_t *buf = malloc(1 << 20);
    bool ok = st && buf && XXH3_128bits_reset(st) == XXH_OK;
    uint64_t total = 0;
    for (ssize_t n; ok && (n = read(fd, buf, 1 << 20)) != 0;) {
        if (n < 0) {
            ok = false;
            break;
        }
        XXH3_128bits_update(st, buf, (size_t)n);
        total += (uint64_t)n;
    }
    if (ok) {
        XXH128_hash_t x = XXH3_128bits_digest(st);
        *h = (chunk_hash){x.low64, x.high64};
        *size = total;
    }
    XXH3_freeState(st);
    free(buf);
    close(fd);
    return ok;
}

bool exact_ship_prepare(const char *dir, uint64_t start_lsn, exact_file **out, size_t *n, char *err,
                        size_t errlen)
{
    char path[4200];
    *out = NULL;
    *n = 0;
    if (xs_applied() < start_lsn) {
        snprintf(err, errlen,
                 "the exact store is complete only below LSN %" PRIu64
                 ", the snapshot starts at %" PRIu64,
                 xs_applied(), start_lsn);
        return false;
    }
    snprintf(path, sizeof(path), "%s/" SHIP_DIR, dir);
    if (!rm_files_dir(path)) {
        snprintf(err, errlen, "can't remove %s: %s", path, datadir_strerror(errno));
        return false;
    }
    if (!xs_checkpoint(path, err, errlen))
        return false;
    DIR *d = datadir_opendir(path);
    if (d == NULL) {
        snprintf(err, errlen, "can't read %s: %s", path, datadir_strerror(errno));
        return false;
    }
    exact_file *files = NULL;
    size_t k = 0, cap = 0;
    bool ok = true;
    for (struct dirent *de; ok && (de = readdir(d)) != NULL;) {
        size_t nlen = strlen(de->d_name);
        if (de->d_name[0] == '.' || nlen >= sizeof(files->name))
            continue;
        if (k == cap) {
            cap = cap ? 2 * cap : 64;
            exact_file *p =
                cap <= EXACT_MANIFEST_MAX_FILES ? realloc(files, cap * sizeof(*p)) : NULL;
            if (p == NULL) {
                snprintf(err, errlen, "out of memory listing %s", path);
                ok = false;
                break;
            }
            files = p;
        }
        exact_file *f = &files[k];
        memcpy(f->name, de->d_name, nlen + 1); /* fits: checked above */
        char fp[4300];
        snprintf(fp, sizeof(fp), "%s/%s", path, f->name);
        if (!hash_file(fp, &f->size, &f->hash)) {
            snprintf(err, errlen, "can't read %s: %s", fp, datadir_strerror(errno));
            ok = false;
        }
        k++;
    }
    closedir(d);
    if (!ok) {
        free(files);
        return false;
    }
    *out = files;
    *n = k;
    return true;
}

void exact_ship_path(const char *dir, const exact_file *f, char *out, size_t len)
{
    snprintf(out, len, "%s/" SHIP_DIR "/%s", dir, f->name);
}

static void recv_path(const char *dir, chunk_hash h, char *out, size_t len)
{
    char hex[33];
    chunk_hash_hex(h, hex);
    snprintf(out, len, "%s/" RECV_DIR "/%s", dir, hex);
}

bool exact_recv_have(const char *dir, const exact_file *f)
{
    char path[4400];
    recv_path(dir, f->hash, path, sizeof(path));
    return datadir_is_file(path);
}

bool exact_recv_store(const char *dir, const exact_file *f, const uint8_t *data, size_t len,
                      char *err, size_t errlen)
{
    XXH128_hash_t x = XXH3_128bits(data, len);
    if (len != f->size || x.low64 != f->hash.lo || x.high64 != f->hash.hi) {
        snprintf(err, errlen, "exact store file %s from the master does not match its hash",
                 f->name);
        return false;
    }
    char rdir[4300], path[4400], tmp[4420];
    snprintf(rdir, sizeof(rdir), "%s/" RECV_DIR, dir);
    recv_path(dir, f->hash, path, sizeof(path));
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    if (!datadir_mkdir(rdir) || !datadir_write_file(tmp, data, len) || !datadir_rename(tmp, path)) {
        snprintf(err, errlen, "writing %s: %s", path, datadir_strerror(errno));
        return false;
    }
    return true;
}

/* Copy (not link) a file the store will change in place. */
static bool copy_file(const char *from, const char *to)
{
    int in = datadir_open_read(from);
    if (in < 0)
        return false;
    struct stat st;
    uint8_t *buf = NULL;
    bool ok = fstat(in, &st) == 0 && (buf = malloc(st.st_size ? (size_t)st.st_size : 1)) != NULL &&
              read(in, buf, (size_t)st.st_size) == st.st_size &&
              datadir_write_file(to, buf, (size_t)st.st_size);
    free(buf);
    close(in);
    return ok;
}

bool exact_recv_install(const char *dir, const exact_file *files, size_t n, char *err,
                        size_t errlen)
{
    char live[4200], fresh[4200], old[4200];
    snprintf(live, sizeof(live), "%s/exact", dir);
    snprintf(fresh, sizeof(fresh), "%s/exact.new", dir);
    snprintf(old, sizeof(old), "%s/exact.old", dir);
    xs_close();
    if (!rm_files_dir(fresh) || !rm_files_dir(old) || !datadir_mkdir(fresh)) {
        snprintf(err, errlen, "can't prepare %s: %s", fresh, datadir_strerror(errno));
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char src[4400], dst[4400];
        recv_path(dir, files[i].hash, src, sizeof(src));
        snprintf(dst, sizeof(dst), "%s/%s", fresh, files[i].name);
        size_t nl = strlen(files[i].name);
        bool table = nl > 4 && strcmp(files[i].name + nl - 4, ".sst") == 0;
        /* Table files never change: linked; the rest copied. */
        if (!(table ? link(src, dst) == 0 : copy_file(src, dst))) {
            snprintf(err, errlen, "can't place %s: %s", dst, datadir_strerror(errno));
            return false;
        }
    }
    if (!datadir_sync_dir(fresh) || (rename(live, old) != 0 && errno != ENOENT) ||
        rename(fresh, live) != 0 || !datadir_sync_dir(dir)) {
        snprintf(err, errlen, "can't install %s: %s", live, datadir_strerror(errno));
        return false;
    }
    rm_files_dir(old);
    /* Keep only what this store was built from for the next resync. */
    char rdir[4300];
    snprintf(rdir, sizeof(rdir), "%s/" RECV_DIR, dir);
    DIR *d = datadir_opendir(rdir);
    for (struct dirent *de; d && (de = readdir(d)) != NULL;) {
        bool keep = de->d_name[0] == '.';
        for (size_t i = 0; i < n && !keep; i++) {
            char hex[33];
            chunk_hash_hex(files[i].hash, hex);
            keep = strcmp(hex, de->d_name) == 0;
        }
        if (!keep)
            unlinkat(dirfd(d), de->d_name, 0);
    }
    if (d)
        closedir(d);
    return true;
}
