/* Files under a data directory, no link followed: see datadir_fs.h. */
#include "datadir_fs.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FILE_MODE 0600
#define DIR_MODE 0700

const char *datadir_strerror(int e)
{
    if (e == ELOOP)
        return "a symbolic link there was refused (links are not followed in the data directory)";
    if (e == EMLINK)
        return "the file has more than one link (refused)";
    return strerror(e);
}

/* ---- directories ---- */

static char *root;

void datadir_set_root(const char *dir)
{
    free(root);
    root = dir ? strdup(dir) : NULL;
}

int datadir_open_dir(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    /* O_DIRECTORY answers ENOTDIR for a link: say it was a link. */
    if (fd < 0 && errno == ENOTDIR && lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
        errno = ELOOP;
    return fd;
}

DIR *datadir_opendir(const char *path)
{
    int fd = datadir_open_dir(path);
    if (fd < 0)
        return NULL;
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        int e = errno;
        close(fd);
        errno = e;
    }
    return d;
}

bool datadir_sync_dir(const char *path)
{
    int fd = datadir_open_dir(path);
    if (fd < 0)
        return false;
    bool ok = fsync(fd) == 0;
    int e = errno;
    close(fd);
    errno = e;
    return ok;
}

bool datadir_mkdir(const char *path)
{
    if (mkdir(path, DIR_MODE) != 0 && errno != EEXIST)
        return false;
    int fd = datadir_open_dir(path);
    if (fd < 0)
        return false;
    close(fd);
    return true;
}

/* The directory of path, opened O_NOFOLLOW; *base: the last component. */
static int open_parent(const char *path, const char **base)
{
    const char *slash = strrchr(path, '/');
    if (slash == NULL) {
        *base = path;
        return datadir_open_dir(".");
    }
    *base = slash + 1;
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    char *dir = malloc(n + 1);
    if (dir == NULL) {
        errno = ENOMEM;
        return -1;
    }
    memcpy(dir, path, n);
    dir[n] = '\0';
    int fd = root && strcmp(dir, root) == 0 ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                                            : datadir_open_dir(dir);
    int e = errno;
    free(dir);
    errno = e;
    return fd;
}

static int close_keep_errno(int fd)
{
    int e = errno;
    close(fd);
    errno = e;
    return -1;
}

/* ---- files ---- */

int datadir_open_read(const char *path)
{
    const char *base;
    int dfd = open_parent(path, &base);
    if (dfd < 0)
        return -1;
    /* O_NONBLOCK: opening a FIFO for reading would wait for a writer. */
    int fd = openat(dfd, base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    close_keep_errno(dfd);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0)
        return close_keep_errno(fd);
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        errno = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
        return -1;
    }
    /* O_NONBLOCK stays: it changes nothing for a regular file. */
    return fd;
}

int datadir_create(const char *path)
{
    const char *base;
    int dfd = open_parent(path, &base);
    if (dfd < 0)
        return -1;
    /* unlinkat removes a link itself, never what it points to. */
    if (unlinkat(dfd, base, 0) != 0 && errno != ENOENT) {
        close_keep_errno(dfd);
        return -1;
    }
    int fd = openat(dfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, FILE_MODE);
    close_keep_errno(dfd);
    return fd;
}

int datadir_open_write_at(int dirfd, const char *name, int flags, mode_t mode)
{
    /* O_NONBLOCK: opening a FIFO for writing would wait for a reader. */
    int fd = openat(dirfd, name,
                    O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC |
                        (flags & (O_CREAT | O_APPEND)),
                    mode);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0)
        return close_keep_errno(fd);
    if (!S_ISREG(st.st_mode) || st.st_nlink != 1) {
        close(fd);
        errno = S_ISREG(st.st_mode) ? EMLINK : EINVAL;
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0 ||
        ((flags & O_TRUNC) && ftruncate(fd, 0) != 0))
        return close_keep_errno(fd);
    return fd;
}

int datadir_open_write(const char *path, int flags)
{
    const char *base;
    int dfd = open_parent(path, &base);
    if (dfd < 0)
        return -1;
    int fd = datadir_open_write_at(dfd, base, flags & ~O_CREAT, FILE_MODE);
    if (fd < 0 && (flags & O_CREAT) && (flags & O_TRUNC) && errno != EISDIR) {
        /* Missing, or something the server does not write through (a link,
         * a second name of another file): a new empty file replaces the
         * name in one rename, so the name is never absent and whatever it
         * pointed to is left alone. */
        size_t n = strlen(base);
        char *tmp = malloc(n + 8);
        if (tmp == NULL) {
            errno = ENOMEM;
            return close_keep_errno(dfd);
        }
        memcpy(tmp, base, n);
        memcpy(tmp + n, ".new", 5);
        if (unlinkat(dfd, tmp, 0) == 0 || errno == ENOENT)
            fd = openat(dfd, tmp,
                        O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | (flags & O_APPEND),
                        FILE_MODE);
        if (fd >= 0 && renameat(dfd, tmp, dfd, base) != 0) {
            close_keep_errno(fd);
            unlinkat(dfd, tmp, 0);
            fd = -1;
        }
        int e = errno;
        free(tmp);
        errno = e;
    }
    close_keep_errno(dfd);
    return fd;
}

bool datadir_is_file(const char *path)
{
    const char *base;
    int dfd = open_parent(path, &base);
    if (dfd < 0)
        return false;
    struct stat st;
    bool ok = fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
    close(dfd);
    return ok;
}

bool datadir_rename(const char *from, const char *to)
{
    const char *fbase, *tbase;
    const char *fs = strrchr(from, '/'), *ts = strrchr(to, '/');
    size_t fl = fs ? (size_t)(fs - from) : 0, tl = ts ? (size_t)(ts - to) : 0;
    if (fl != tl || (fl && memcmp(from, to, fl) != 0)) {
        errno = EXDEV; /* one directory only */
        return false;
    }
    int dfd = open_parent(from, &fbase);
    if (dfd < 0)
        return false;
    tbase = ts ? ts + 1 : to;
    bool ok = renameat(dfd, fbase, dfd, tbase) == 0;
    close_keep_errno(dfd);
    return ok;
}

bool datadir_unlink(const char *path)
{
    const char *base;
    int dfd = open_parent(path, &base);
    if (dfd < 0)
        return false;
    bool ok = unlinkat(dfd, base, 0) == 0;
    close_keep_errno(dfd);
    return ok;
}

/* ---- who may change it ---- */

static const char *const SUBDIRS[] = {"log", "snapshots", "chunks"};
#define NSUBDIRS (sizeof(SUBDIRS) / sizeof(SUBDIRS[0]))

/* "uid N (name)" */
static void who(char *out, size_t outlen, uid_t uid)
{
    struct passwd pw, *res = NULL;
    char buf[1024];
    if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) == 0 && res)
        snprintf(out, outlen, "uid %u (%s)", (unsigned)uid, res->pw_name);
    else
        snprintf(out, outlen, "uid %u", (unsigned)uid);
}

static bool check_one(const char *path, const struct stat *st, uid_t uid, char *err, size_t errlen)
{
    char owner[300], me[300];
    unsigned mode = (unsigned)(st->st_mode & 07777);
    who(owner, sizeof(owner), st->st_uid);
    if (!S_ISDIR(st->st_mode)) {
        snprintf(err, errlen, "data directory \"%s\" is not a directory", path);
        return false;
    }
    if (st->st_uid != uid) {
        who(me, sizeof(me), uid);
        snprintf(err, errlen,
                 "data directory \"%s\" has wrong ownership: owned by %s, mode %04o; the "
                 "server runs as %s and uses only a data directory that user owns",
                 path, owner, mode, me);
        return false;
    }
    if (st->st_mode & (S_IWGRP | S_IWOTH)) {
        snprintf(err, errlen,
                 "data directory \"%s\" has invalid permissions: mode %04o, owned by %s; group "
                 "or others may write it, and they must not (chmod go-w, or 0700)",
                 path, mode, owner);
        return false;
    }
    return true;
}

bool datadir_check_access(const char *dir, uid_t uid, char *err, size_t errlen)
{
    struct stat st;
    /* DIR itself may be a link to the real directory: that is checked. */
    if (stat(dir, &st) != 0) {
        snprintf(err, errlen, "data directory \"%s\": %s", dir, strerror(errno));
        return false;
    }
    if (!check_one(dir, &st, uid, err, errlen))
        return false;
    for (size_t i = 0; i < NSUBDIRS; i++) {
        char path[4400];
        snprintf(path, sizeof(path), "%.4096s/%s", dir, SUBDIRS[i]);
        if (lstat(path, &st) != 0) {
            if (errno == ENOENT)
                continue; /* made 0700 at start */
            snprintf(err, errlen, "data directory \"%s\": %s", path, strerror(errno));
            return false;
        }
        if (S_ISLNK(st.st_mode)) {
            snprintf(err, errlen,
                     "data directory \"%s\" is a symbolic link: the server makes its "
                     "subdirectories itself and follows no link in the data directory",
                     path);
            return false;
        }
        if (!check_one(path, &st, uid, err, errlen))
            return false;
    }
    return true;
}

size_t datadir_check_files(const char *dir, uid_t uid, void (*fn)(void *ctx, const char *msg),
                           void *ctx)
{
    size_t found = 0;
    for (size_t i = 0; i < NSUBDIRS; i++) {
        char sub[4400];
        snprintf(sub, sizeof(sub), "%.4096s/%s", dir, SUBDIRS[i]);
        DIR *d = datadir_opendir(sub);
        if (d == NULL)
            continue;
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                continue;
            struct stat st;
            if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
                continue;
            char msg[5000], owner[300];
            unsigned mode = (unsigned)(st.st_mode & 07777);
            who(owner, sizeof(owner), st.st_uid);
            if (S_ISLNK(st.st_mode))
                snprintf(msg, sizeof(msg),
                         "%s/%s is a symbolic link: the server follows none and refuses to "
                         "open it",
                         sub, de->d_name);
            else if (!S_ISREG(st.st_mode))
                snprintf(msg, sizeof(msg), "%s/%s is not a regular file", sub, de->d_name);
            else if (st.st_uid != uid)
                snprintf(msg, sizeof(msg), "%s/%s is owned by %s, not by the directory's owner",
                         sub, de->d_name, owner);
            else if (st.st_mode & (S_IWGRP | S_IWOTH))
                snprintf(msg, sizeof(msg), "%s/%s has mode %04o: group or others may write it", sub,
                         de->d_name, mode);
            else
                continue;
            fn(ctx, msg);
            found++;
        }
        closedir(d);
    }
    return found;
}
