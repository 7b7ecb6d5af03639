/* Files under a bloomeryd data directory, opened so that no symbolic link
 * is followed, and the directory's owner and mode checked. Every open,
 * create, rename, unlink and directory listing of bloomeryd (and of
 * `bloomery check-data`) under --dir goes through these calls, so the rule
 * lives here only:
 *
 * - a file's directory (DIR/log, DIR/snapshots, DIR/chunks, made by the
 *   server) is opened O_DIRECTORY|O_NOFOLLOW and the file is reached from
 *   that descriptor (openat, renameat, unlinkat): a subdirectory replaced by
 *   a link is refused. DIR itself may be a link (an administrator's choice:
 *   datadir_set_root names it, for the files directly in it);
 * - every file is opened O_NOFOLLOW, and reads take regular files only (a
 *   FIFO planted at a name would block the server);
 * - a new name is created O_CREAT|O_EXCL after any stale entry at it is
 *   removed (unlink removes a link, never its target); a name that must not
 *   vanish meanwhile (a log file re-created at its LSN) is opened without
 *   O_TRUNC and truncated only once it is known to be a regular file with
 *   one link, else replaced by a rename, so a file reached through a link
 *   or a second name is never cut;
 * - files are created 0600 and directories 0700.
 *
 * Functions return -1 or false with errno set; ELOOP means a link was
 * refused (datadir_strerror says so in words).
 */
#ifndef BLOOMERY_DATADIR_FS_H
#define BLOOMERY_DATADIR_FS_H

#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* strerror, but for ELOOP and EMLINK, which these calls use for a refused
 * link, words that say so. */
const char *datadir_strerror(int e);

/* ---- directories ---- */

/* The data directory as the paths given to these calls spell it: it may be
 * a link (checked through it, datadir_check_access), its subdirectories
 * not. Before it is set every directory is opened O_NOFOLLOW. */
void datadir_set_root(const char *dir);

/* A subdirectory the server made: O_RDONLY|O_DIRECTORY|O_NOFOLLOW. */
int datadir_open_dir(const char *path);
/* The same, for readdir (closedir closes it). */
DIR *datadir_opendir(const char *path);
/* fsync of such a directory. */
bool datadir_sync_dir(const char *path);
/* Make a subdirectory 0700 unless it exists, then make sure it is a
 * directory and not a link. */
bool datadir_mkdir(const char *path);

/* ---- files ---- */

/* A regular file for reading. */
int datadir_open_read(const char *path);
/* A new file at path for writing, 0600: whatever is at the name (a stale
 * temporary file, or a link planted there) is removed first. */
int datadir_create(const char *path);
/* path for writing without its name ever being absent. A regular file
 * with one link is opened, and truncated when flags has O_TRUNC. With
 * O_CREAT|O_TRUNC anything else at the name (nothing, a link, a second
 * name of another file) is replaced by a new empty file, 0600, in one
 * rename from "<path>.new"; without them it is refused (ELOOP, EMLINK).
 * flags: O_CREAT, O_TRUNC, O_APPEND. */
int datadir_open_write(const char *path, int flags);
/* A regular file at path, not following a link (a link is not a file). */
bool datadir_is_file(const char *path);
/* rename within one directory, from that directory's descriptor. */
bool datadir_rename(const char *from, const char *to);
bool datadir_unlink(const char *path);

/* The same rule for a file named outside the data directory (the pid
 * file): the last component is not followed, the file is created with
 * mode when missing and truncated only once it is a regular file with one
 * link. The directories on the way may be links. */
int datadir_open_write_at(int dirfd, const char *name, int flags, mode_t mode);

/* ---- who may change it ---- */

/* The data directory and the subdirectories the server makes: each a
 * directory (the subdirectories not links), owned by uid and writable by
 * nobody else (no group or other write bit). Files inside are not
 * checked: the server creates them 0600, and only the owner of a
 * directory no one else may write can add, replace or rename one (the
 * rule of PostgreSQL's data directory). false with err naming the path,
 * its owner and its mode. */
bool datadir_check_access(const char *dir, uid_t uid, char *err, size_t errlen);

/* For `bloomery check-data`: the entries of the subdirectories that are
 * not regular files or directories, owned by someone other than uid, or
 * writable by group or others; each is handed to fn as a sentence. The
 * number found. */
size_t datadir_check_files(const char *dir, uid_t uid, void (*fn)(void *ctx, const char *msg),
                           void *ctx);

#endif
