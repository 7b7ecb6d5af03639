/* syncshim: an LD_PRELOAD library that journals what a process made durable
 * and injects storage faults, for the power-cut and fault tests of bloomeryd.
 *
 * Environment, read once at load:
 *   SYNCSHIM_DIR      only files under this directory are journaled or
 *                     faulted (the server's data directory);
 *   SYNCSHIM_JOURNAL  append-only journal of what reached the disk, one
 *                     line per event, each opened by the CLOCK_MONOTONIC
 *                     nanosecond at which it took effect (see below):
 *                       "<path> <size>"   a regular file synced (fsync,
 *                                         fdatasync; syncfs lists every file
 *                                         under SYNCSHIM_DIR);
 *                       "DIRSYNC <path>"  a directory fsynced;
 *                       "RENAME <old> <new>", "UNLINK <path>";
 *                       "BLOCKED <path>"  a sync is being held (fsync=block);
 *   SYNCSHIM_CTL      control file, looked at (stat) on every intercepted
 *                     call and re-read when it changed; replace it with a
 *                     rename so it is never read half-written. Lines:
 *                       fsync=ok|eio|block|skip   (fsync, fdatasync, syncfs)
 *                       write=ok|eio|enospc       (write, pwrite, writev;
 *                                                 enospc: a full disk)
 *                       match=<substring>         faults only for paths
 *                                                 containing it
 *                       delay=<ms>                every sync takes that much
 *                                                 longer (a slow disk)
 *   SYNCSHIM_REALLOC_OVER  realloc of this many bytes or more fails with
 *                     ENOMEM (an allocation the machine cannot give); read
 *                     once. Not seen under a sanitizer, whose runtime comes
 *                     first in the library list and answers realloc itself.
 *
 * A file's size is taken when the sync is called, before any block or delay
 * and before the real sync: the bytes written before the call are what a
 * successful sync guarantees (a write racing the sync, or made while the
 * disk is slow to answer, may or may not be covered, so it is not claimed).
 * Its line can only be written once the sync succeeded, after lines of
 * events that happened later (a syncfs that takes long, and an fsync of one
 * of its files that came and went meanwhile): the time each line opens with
 * is when its sizes were taken, or when a rename or unlink returned, and the
 * journal is read in that order.
 *
 * "skip" returns 0 without syncing or journaling: a build without that
 * fsync; a syncfs leaves the files it matches out of its journal lines too,
 * as if they lived on another file system (a store must not count on
 * another's syncfs). The journal is written with O_APPEND write(2): the page
 * cache survives the SIGKILL that ends the process, and the power cut is
 * applied by the test afterwards.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

enum { OK, FAIL_EIO, BLOCK, SKIP, FAIL_ENOSPC };

typedef struct ctl {
    int fsync, write;
    long delay_ms;
    char match[256];
} ctl;

static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_syncfs)(int);
static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_pwrite64)(int, const void *, size_t, off64_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static int (*real_rename)(const char *, const char *);
static int (*real_renameat)(int, const char *, int, const char *);
static int (*real_unlink)(const char *);
static int (*real_unlinkat)(int, const char *, int);

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char dir[PATH_MAX];
static size_t dirlen;
static const char *ctl_path;
static int journal_fd = -1;

static pthread_mutex_t ctl_lock = PTHREAD_MUTEX_INITIALIZER;
static ctl cur;
static struct stat seen;
static bool have_seen;

static void init(void)
{
    real_fsync = dlsym(RTLD_NEXT, "fsync");
    real_fdatasync = dlsym(RTLD_NEXT, "fdatasync");
    real_syncfs = dlsym(RTLD_NEXT, "syncfs");
    real_write = dlsym(RTLD_NEXT, "write");
    real_pwrite = dlsym(RTLD_NEXT, "pwrite");
    real_pwrite64 = dlsym(RTLD_NEXT, "pwrite64");
    real_writev = dlsym(RTLD_NEXT, "writev");
    real_rename = dlsym(RTLD_NEXT, "rename");
    real_renameat = dlsym(RTLD_NEXT, "renameat");
    real_unlink = dlsym(RTLD_NEXT, "unlink");
    real_unlinkat = dlsym(RTLD_NEXT, "unlinkat");
    const char *d = getenv("SYNCSHIM_DIR");
    if (d && *d) {
        /* /proc/self/fd links are canonical paths: compare with one. */
        if (realpath(d, dir) == NULL)
            snprintf(dir, sizeof(dir), "%s", d);
        dirlen = strlen(dir);
        while (dirlen > 1 && dir[dirlen - 1] == '/')
            dir[--dirlen] = '\0';
    }
    const char *c = getenv("SYNCSHIM_CTL");
    if (c && *c)
        ctl_path = c;
    const char *j = getenv("SYNCSHIM_JOURNAL");
    if (j && *j)
        journal_fd = open(j, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

__attribute__((constructor)) static void load(void) { pthread_once(&once, init); }

static void ensure(void) { pthread_once(&once, init); }

static bool under_dir(const char *path)
{
    return dirlen > 0 && strncmp(path, dir, dirlen) == 0 &&
           (path[dirlen] == '/' || path[dirlen] == '\0');
}

/* The canonical path of an open file; false when unknown or deleted. */
static bool fd_path(int fd, char *out, size_t outlen)
{
    char link[64];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, out, outlen - 1);
    if (n <= 0)
        return false;
    out[n] = '\0';
    return strstr(out, " (deleted)") == NULL;
}

/* A path as it will read in the journal: the directory canonicalised, the
 * last component kept (it may not exist any more, or not yet). */
static bool norm_path(int dirfd, const char *p, char *out, size_t outlen)
{
    char tmp[PATH_MAX], base[PATH_MAX], parent[PATH_MAX];
    if (p[0] != '/' && dirfd != AT_FDCWD) {
        char d[PATH_MAX];
        if (!fd_path(dirfd, d, sizeof(d)))
            return false;
        if ((size_t)snprintf(tmp, sizeof(tmp), "%s/%s", d, p) >= sizeof(tmp))
            return false;
    } else {
        snprintf(tmp, sizeof(tmp), "%s", p);
    }
    char *slash = strrchr(tmp, '/');
    if (slash == NULL) {
        snprintf(base, sizeof(base), "%s", tmp);
        snprintf(tmp, sizeof(tmp), ".");
    } else {
        snprintf(base, sizeof(base), "%s", slash + 1);
        if (slash == tmp)
            slash[1] = '\0';
        else
            *slash = '\0';
    }
    if (realpath(tmp, parent) == NULL)
        return false;
    return (size_t)snprintf(out, outlen, "%s/%s", strcmp(parent, "/") ? parent : "", base) < outlen;
}

static unsigned long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

/* One line, opened by the time the event took effect (0: now). */
static void journal_at(unsigned long long stamp, const char *fmt, ...)
{
    if (journal_fd < 0)
        return;
    char line[3 * PATH_MAX + 32];
    int k = snprintf(line, sizeof(line), "%llu ", stamp ? stamp : now_ns());
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line + k, sizeof(line) - (size_t)k, fmt, ap);
    va_end(ap);
    if (n <= 0 || (size_t)n >= sizeof(line) - (size_t)k)
        return;
    n += k;
    /* One write per line: O_APPEND keeps concurrent lines whole. */
    ssize_t w;
    do
        w = real_write(journal_fd, line, (size_t)n);
    while (w < 0 && errno == EINTR);
}

static int parse_mode(const char *v, bool sync)
{
    if (strcmp(v, "eio") == 0)
        return FAIL_EIO;
    if (!sync && strcmp(v, "enospc") == 0)
        return FAIL_ENOSPC;
    if (sync && strcmp(v, "block") == 0)
        return BLOCK;
    if (sync && strcmp(v, "skip") == 0)
        return SKIP;
    return OK;
}

static void parse(ctl *c, char *text)
{
    memset(c, 0, sizeof(*c));
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        size_t n = strlen(line);
        while (n && (line[n - 1] == '\r' || line[n - 1] == ' '))
            line[--n] = '\0';
        if (strncmp(line, "fsync=", 6) == 0)
            c->fsync = parse_mode(line + 6, true);
        else if (strncmp(line, "write=", 6) == 0)
            c->write = parse_mode(line + 6, false);
        else if (strncmp(line, "match=", 6) == 0)
            snprintf(c->match, sizeof(c->match), "%s", line + 6);
        else if (strncmp(line, "delay=", 6) == 0)
            c->delay_ms = strtol(line + 6, NULL, 10);
    }
}

static ctl ctl_load(void)
{
    ctl c = {0};
    if (ctl_path == NULL)
        return c;
    struct stat st;
    int rc = stat(ctl_path, &st);
    pthread_mutex_lock(&ctl_lock);
    if (rc != 0) {
        memset(&cur, 0, sizeof(cur));
        have_seen = false;
    } else if (!have_seen || st.st_ino != seen.st_ino || st.st_dev != seen.st_dev ||
               st.st_size != seen.st_size || st.st_mtim.tv_sec != seen.st_mtim.tv_sec ||
               st.st_mtim.tv_nsec != seen.st_mtim.tv_nsec) {
        char text[4096];
        int fd = open(ctl_path, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd < 0 ? -1 : read(fd, text, sizeof(text) - 1);
        if (fd >= 0)
            close(fd);
        text[n > 0 ? n : 0] = '\0';
        parse(&cur, text);
        seen = st;
        have_seen = true;
    }
    c = cur;
    pthread_mutex_unlock(&ctl_lock);
    return c;
}

static bool matches(const ctl *c, const char *path)
{
    return c->match[0] == '\0' || strstr(path, c->match) != NULL;
}

static int sync_mode(const char *path, long *delay_ms)
{
    ctl c = ctl_load();
    if (delay_ms)
        *delay_ms = matches(&c, path) ? c.delay_ms : 0;
    return matches(&c, path) ? c.fsync : OK;
}

static int write_mode(int fd)
{
    if (dirlen == 0 || ctl_path == NULL)
        return OK;
    ctl c = ctl_load();
    if (c.write == OK)
        return OK;
    char path[PATH_MAX];
    if (!fd_path(fd, path, sizeof(path)) || !under_dir(path) || !matches(&c, path))
        return OK;
    return c.write;
}

/* Every regular file under path with its size, one journal line each,
 * appended to *buf; not those whose syncs are skipped. */
static void walk(const char *path, unsigned long long stamp, char **buf, size_t *len, size_t *cap)
{
    DIR *d = opendir(path);
    if (d == NULL)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char sub[PATH_MAX];
        if ((size_t)snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name) >= sizeof(sub))
            continue;
        struct stat st;
        if (lstat(sub, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            walk(sub, stamp, buf, len, cap);
        } else if (S_ISREG(st.st_mode) && sync_mode(sub, NULL) != SKIP) {
            size_t need = strlen(sub) + 64;
            if (*len + need > *cap) {
                size_t ncap = (*cap ? *cap * 2 : 4096) + need;
                char *nb = realloc(*buf, ncap);
                if (nb == NULL)
                    continue;
                *buf = nb;
                *cap = ncap;
            }
            *len += (size_t)snprintf(*buf + *len, *cap - *len, "%llu %s %lld\n", stamp, sub,
                                     (long long)st.st_size);
        }
    }
    closedir(d);
}

enum { SYNC_FILE, SYNC_DATA, SYNC_FS };

static int do_sync(int fd, int kind)
{
    ensure();
    int (*real)(int) = kind == SYNC_FILE   ? real_fsync
                       : kind == SYNC_DATA ? real_fdatasync
                                           : real_syncfs;
    char path[PATH_MAX];
    if (dirlen == 0 || !fd_path(fd, path, sizeof(path)) || !under_dir(path))
        return real(fd);
    /* What the sync covers: the sizes at the call, before a block or a
     * delay (writes made while the disk is slow are not covered). */
    unsigned long long stamp = now_ns();
    struct stat st;
    if (fstat(fd, &st) != 0)
        return real(fd);
    char *lines = NULL;
    size_t len = 0, cap = 0;
    long delay_ms;
    int mode = sync_mode(path, &delay_ms);
    if (kind == SYNC_FS && mode != FAIL_EIO && mode != SKIP)
        walk(dir, stamp, &lines, &len, &cap);
    if (mode == BLOCK) {
        journal_at(0, "BLOCKED %s\n", path);
        struct timespec ts = {0, 2 * 1000 * 1000};
        while ((mode = sync_mode(path, &delay_ms)) == BLOCK)
            nanosleep(&ts, NULL);
    }
    if (mode == FAIL_EIO || mode == SKIP) {
        free(lines);
        if (mode == SKIP)
            return 0;
        errno = EIO;
        return -1;
    }
    if (delay_ms > 0) {
        struct timespec ts = {delay_ms / 1000, (delay_ms % 1000) * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    int rc = real(fd);
    if (rc == 0) {
        if (kind == SYNC_FS) {
            if (len && journal_fd >= 0) {
                ssize_t w;
                do
                    w = real_write(journal_fd, lines, len);
                while (w < 0 && errno == EINTR);
            }
        } else if (S_ISREG(st.st_mode)) {
            journal_at(stamp, "%s %lld\n", path, (long long)st.st_size);
        } else if (S_ISDIR(st.st_mode)) {
            journal_at(stamp, "DIRSYNC %s\n", path);
        }
    }
    free(lines);
    return rc;
}

/* A write the control file fails: errno set, true. */
static bool write_failed(int fd)
{
    int mode = write_mode(fd);
    if (mode != FAIL_EIO && mode != FAIL_ENOSPC)
        return false;
    errno = mode == FAIL_EIO ? EIO : ENOSPC;
    return true;
}

int fsync(int fd) { return do_sync(fd, SYNC_FILE); }
int fdatasync(int fd) { return do_sync(fd, SYNC_DATA); }
int syncfs(int fd) { return do_sync(fd, SYNC_FS); }

ssize_t write(int fd, const void *buf, size_t n)
{
    ensure();
    if (write_failed(fd))
        return -1;
    return real_write(fd, buf, n);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    ensure();
    if (write_failed(fd))
        return -1;
    return real_pwrite(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off64_t off)
{
    ensure();
    if (write_failed(fd))
        return -1;
    return real_pwrite64(fd, buf, n, off);
}

ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
    ensure();
    if (write_failed(fd))
        return -1;
    return real_writev(fd, iov, cnt);
}

/* Names follow renames and unlinks in the journal, so a file synced under a
 * temporary name keeps its synced size under the final one. */
static void note_rename(const char *oldn, int newdirfd, const char *newp)
{
    char newn[PATH_MAX];
    if (!norm_path(newdirfd, newp, newn, sizeof(newn)))
        return;
    if (under_dir(oldn) || under_dir(newn))
        journal_at(0, "RENAME %s %s\n", oldn, newn);
}

int rename(const char *oldp, const char *newp)
{
    ensure();
    char oldn[PATH_MAX];
    bool have = dirlen > 0 && norm_path(AT_FDCWD, oldp, oldn, sizeof(oldn));
    int rc = real_rename(oldp, newp);
    if (rc == 0 && have)
        note_rename(oldn, AT_FDCWD, newp);
    return rc;
}

int renameat(int olddirfd, const char *oldp, int newdirfd, const char *newp)
{
    ensure();
    char oldn[PATH_MAX];
    bool have = dirlen > 0 && norm_path(olddirfd, oldp, oldn, sizeof(oldn));
    int rc = real_renameat(olddirfd, oldp, newdirfd, newp);
    if (rc == 0 && have)
        note_rename(oldn, newdirfd, newp);
    return rc;
}

int unlink(const char *p)
{
    ensure();
    char n[PATH_MAX];
    bool have = dirlen > 0 && norm_path(AT_FDCWD, p, n, sizeof(n));
    int rc = real_unlink(p);
    if (rc == 0 && have && under_dir(n))
        journal_at(0, "UNLINK %s\n", n);
    return rc;
}

int unlinkat(int dirfd, const char *p, int flags)
{
    ensure();
    char n[PATH_MAX];
    bool have = dirlen > 0 && norm_path(dirfd, p, n, sizeof(n));
    int rc = real_unlinkat(dirfd, p, flags);
    if (rc == 0 && have && under_dir(n))
        journal_at(0, "UNLINK %s\n", n);
    return rc;
}

/* The allocation fault. __libc_realloc is glibc's own: no dlsym, which may
 * allocate, on the way in. */
extern void *__libc_realloc(void *p, size_t n);

void *realloc(void *p, size_t n)
{
    static size_t over = (size_t)-1;
    static bool read_env;
    if (!__atomic_load_n(&read_env, __ATOMIC_ACQUIRE)) {
        const char *v = getenv("SYNCSHIM_REALLOC_OVER");
        if (v && *v)
            __atomic_store_n(&over, (size_t)strtoull(v, NULL, 10), __ATOMIC_RELAXED);
        __atomic_store_n(&read_env, true, __ATOMIC_RELEASE);
    }
    if (n >= __atomic_load_n(&over, __ATOMIC_RELAXED)) {
        errno = ENOMEM;
        return NULL;
    }
    return __libc_realloc(p, n);
}
