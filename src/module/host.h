/* The module host: what the command handlers of src/server/cmd run on when
 * they run inside Redis. keyspace_host.c gives them keyspace.h over Redis
 * keys, log_host.c gives them persist.h's log calls (replication),
 * reply_rm.c gives them reply.h over Redis's reply calls, rdb.c saves and
 * loads their values, module.c registers the commands.
 */
#ifndef BLOOMERY_MODULE_HOST_H
#define BLOOMERY_MODULE_HOST_H

#include <stdbool.h>
#include <stdint.h>

#include "keyspace.h"
#include "rm_api.h"
#include "types.h"

/* The module type that holds values of t (its descriptor's module_type);
 * NULL for a type the module does not keep in Redis keys (HLL). */
RedisModuleType *mh_module_type(const value_type *t);
/* Whether mt is one of the module types of rdb.c or RedisBloom's names
 * (rb_types.c). */
bool mh_is_ours(const RedisModuleType *mt);
bool mh_is_redisbloom(const RedisModuleType *mt);

/* A value of type t around v, built outside a command (loaded): hooks
 * installed, bytes counted. NULL when out of memory (v not freed). */
kv_obj *mh_value_loaded(const value_type *t, void *v);

/* The methods every module type of ours shares (all but rdb_load). */
void mh_value_methods(rm_type_methods *m);

/* Register RedisBloom's type names (rb_types.c). */
bool mh_redisbloom_register(RedisModuleCtx *ctx);

/* What a key of another type (a Redis string, list, ... or another module's
 * value) looks like to the handlers: no command accepts it, so each answers
 * WRONGTYPE as bloomeryd does. */
extern const value_type foreign_type;
/* A dump that was still being restored when Redis saved the key: its
 * chunks so far are not in the RDB file, so after loading, the key holds
 * this (every command answers WRONGTYPE; DEL removes it). */
extern const value_type lost_restore_type;

/* Run one command with ctx as the current context. Redis runs module
 * commands on its one thread, one at a time, and a context is valid for
 * exactly that call, so the host keeps it in a global for the duration:
 * the keyspace calls the handler makes (which take no context) reach keys
 * through it. A write command opens every key for writing, even where the
 * handler only asked to read it (it changes a value in place under a
 * shared open), so Redis sees the key modified: WATCH and client-side
 * caching invalidate. mh_end closes every key opened and frees every entry
 * made during the command. */
void mh_begin(RedisModuleCtx *ctx, bool write);
/* The command's arguments as Redis gave them (argv) and as the handler sees
 * them (av, lens): a key the handler opens by one of av's arguments is
 * opened by Redis's string, without a copy. Until mh_end. */
void mh_args(RedisModuleString **argv, const char **av, const size_t *lens, int argc);
void mh_end(void);
RedisModuleCtx *mh_ctx(void);

/* Set by the log calls: the command changed data and must be replicated. */
extern bool mh_changed;

/* Windows' clock and rotations (window_repl.c). A command calls
 * mh_win_begin before its handler, mh_win_replicate before replicating
 * itself (the rotations it performed, then the instant it ran at) and
 * mh_win_end after; the log host notes each rotation. */
void mh_win_begin(void);
void mh_win_note_rotation(const char *key, size_t klen, int64_t start, bool early);
void mh_win_replicate(RedisModuleCtx *ctx, bool command);
void mh_win_end(void);
/* Register BLOOMERY.WINCLOCK, BLOOMERY.WINROTATE and the rotation timer
 * (OnLoad). */
bool mh_window_register(RedisModuleCtx *ctx);

/* The module types' AOF rewrite (aof.c). */
void mh_aof_rewrite(RedisModuleIO *io, RedisModuleString *key, void *value);

/* Register the settings as module configs and load their values
 * (OnLoad, after the module's arguments; config_host.c). */
bool mh_config_register(RedisModuleCtx *ctx);

/* Register BLOOMERY.LOADCHUNK (OnLoad; loadchunk.c). */
bool mh_loadchunk_register(RedisModuleCtx *ctx);

/* Create a command with what it declares to Redis (declare.c): flags,
 * key specs and ACL categories as RedisBloom's; false, with a log line,
 * for a name the table lacks. mh_add_acl_categories adds the families'
 * ACL categories first where Redis can (OnLoad). */
bool mh_create_command(RedisModuleCtx *ctx, const char *name, rm_cmd_fn fn);
void mh_add_acl_categories(RedisModuleCtx *ctx);

/* Register the module types (OnLoad). */
bool mh_rdb_register(RedisModuleCtx *ctx);

#endif
