/* The part of Redis's module ABI this module uses, declared here because
 * Debian ships no header for it. Only facts of the ABI: the names Redis
 * looks functions up by, their signatures, and constant values, as of
 * Redis 7.0.
 *
 * Redis hands OnLoad a context whose first word is its lookup function;
 * rm_api_init asks it for every function below and fills `rm`. Functions
 * newer than 7.0 are optional: their pointer stays NULL when Redis does not
 * have them.
 */
#ifndef BLOOMERY_RM_API_H
#define BLOOMERY_RM_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RM_OK 0
#define RM_ERR 1
#define RM_APIVER_1 1

/* OpenKey modes. */
#define RM_READ (1 << 0)
#define RM_WRITE (1 << 1)

/* KeyType answers. */
#define RM_KEYTYPE_EMPTY 0
#define RM_KEYTYPE_MODULE 6

/* GetExpire's answer for a key without expiry. */
#define RM_NO_EXPIRE (-1)

/* GetContextFlags bits. */
#define RM_CTX_FLAGS_SLAVE (1 << 3)
#define RM_CTX_FLAGS_REPLICATED (1 << 12) /* sent by the master */
#define RM_CTX_FLAGS_LOADING (1 << 13)    /* an RDB or AOF file being loaded */
#define RM_CTX_FLAGS_RESP3 (1 << 22)

/* NotifyKeyspaceEvent's class for events of modules' own ('g' in
 * notify-keyspace-events). */
#define RM_NOTIFY_GENERIC (1 << 2)

/* SetModuleOptions: rdb_load may fail (returns NULL) and Redis handles it. */
#define RM_OPTIONS_HANDLE_IO_ERRORS (1 << 0)

/* CallReplyType answers. */
#define RM_REPLY_STRING 0
#define RM_REPLY_ARRAY 3

/* RedisModuleTypeMethods up to version 3's fields (Redis reads no
 * further). */
#define RM_TYPE_METHOD_VERSION 3

typedef struct RedisModuleCtx RedisModuleCtx;
typedef struct RedisModuleKey RedisModuleKey;
typedef struct RedisModuleString RedisModuleString;
typedef struct RedisModuleType RedisModuleType;
typedef struct RedisModuleIO RedisModuleIO;
typedef struct RedisModuleDigest RedisModuleDigest;
typedef struct RedisModuleCallReply RedisModuleCallReply;
typedef struct RedisModuleCommand RedisModuleCommand;
typedef struct RedisModuleScanCursor RedisModuleScanCursor;

typedef int (*rm_cmd_fn)(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

/* SetCommandInfo (Redis 7.0): a command's key specs, version 1 of the
 * structures. Redis steps through arrays by the sizes the version gives,
 * so these must be laid out as its own. */
#define RM_CMD_KEY_RO (1ULL << 0)
#define RM_CMD_KEY_RW (1ULL << 1)
#define RM_CMD_KEY_ACCESS (1ULL << 4)
#define RM_CMD_KEY_UPDATE (1ULL << 5)
#define RM_CMD_KEY_INSERT (1ULL << 6)
#define RM_CMD_KEY_DELETE (1ULL << 7)
#define RM_KSPEC_BS_INDEX 2  /* begin search at a fixed index */
#define RM_KSPEC_FK_RANGE 2  /* keys: a range from there */
#define RM_KSPEC_FK_KEYNUM 3 /* keys: a count, then that many */

typedef struct rm_key_spec {
    const char *notes;
    uint64_t flags;
    int begin_search_type; /* an enum in Redis's header: int-sized */
    union {
        struct {
            int pos;
        } index;
        struct {
            const char *keyword;
            int startfrom;
        } keyword;
    } bs;
    int find_keys_type;
    union {
        struct {
            int lastkey, keystep, limit;
        } range;
        struct {
            int keynumidx, firstkey, keystep;
        } keynum;
    } fk;
} rm_key_spec;

typedef struct rm_command_info_version {
    int version; /* 1 */
    size_t sizeof_historyentry;
    size_t sizeof_keyspec;
    size_t sizeof_arg;
} rm_command_info_version;

typedef struct rm_command_info {
    const rm_command_info_version *version;
    const char *summary;
    const char *complexity;
    const char *since;
    void *history;
    const char *tips;
    int arity;              /* 0: keep CreateCommand's */
    rm_key_spec *key_specs; /* ended by a zeroed spec */
    void *args;
} rm_command_info;
typedef void (*rm_timer_fn)(RedisModuleCtx *ctx, void *data);
typedef void (*rm_scan_fn)(RedisModuleCtx *ctx, RedisModuleString *name, RedisModuleKey *k,
                           void *arg);

/* A server event to subscribe to, passed by value: its id and the version
 * of the data it comes with. */
typedef struct rm_event {
    uint64_t id;
    uint64_t dataver;
} rm_event;
#define RM_EVENT_CONFIG 16 /* CONFIG SET changed settings (Redis 7.0) */
#define RM_EVENT_LOADING 3 /* an RDB or AOF file (or a master's) being loaded */
#define RM_SUBEVENT_LOADING_ENDED 3
typedef void (*rm_event_fn)(RedisModuleCtx *ctx, rm_event event, uint64_t subevent, void *data);

/* Module configs (Redis 7.0): CONFIG GET/SET <module>.<name>. */
typedef RedisModuleString *(*rm_config_get_fn)(const char *name, void *arg);
typedef int (*rm_config_set_fn)(const char *name, RedisModuleString *value, void *arg,
                                RedisModuleString **err);
typedef int (*rm_config_apply_fn)(RedisModuleCtx *ctx, void *arg, RedisModuleString **err);
#define RM_CONFIG_DEFAULT 0

typedef struct rm_type_methods {
    uint64_t version;
    void *(*rdb_load)(RedisModuleIO *io, int encver);
    void (*rdb_save)(RedisModuleIO *io, void *value);
    void (*aof_rewrite)(RedisModuleIO *io, RedisModuleString *key, void *value);
    size_t (*mem_usage)(const void *value);
    void (*digest)(RedisModuleDigest *md, void *value);
    void (*free)(void *value);
    void *aux_load;        /* unused */
    void *aux_save;        /* unused */
    int aux_save_triggers; /* unused */
    void *free_effort;     /* unused */
    void *unlink;          /* unused */
    void *(*copy)(RedisModuleString *from, RedisModuleString *to, const void *value);
    void *defrag; /* unused */
} rm_type_methods;

/* X(return type, name, parameters): required functions. */
#define RM_FUNCTIONS(X)                                                                            \
    X(void, SetModuleAttribs, (RedisModuleCtx * ctx, const char *name, int ver, int apiver))       \
    X(int, IsModuleNameBusy, (const char *name))                                                   \
    X(int, CreateCommand,                                                                          \
      (RedisModuleCtx * ctx, const char *name, rm_cmd_fn fn, const char *flags, int first,         \
       int last, int step))                                                                        \
    X(RedisModuleType *, CreateDataType,                                                           \
      (RedisModuleCtx * ctx, const char *name, int encver, rm_type_methods *methods))              \
    X(void, SetModuleOptions, (RedisModuleCtx * ctx, int options))                                 \
    X(int, GetContextFlags, (RedisModuleCtx * ctx))                                                \
    X(const char *, StringPtrLen, (const RedisModuleString *s, size_t *len))                       \
    X(RedisModuleString *, CreateString, (RedisModuleCtx * ctx, const char *p, size_t len))        \
    X(void, FreeString, (RedisModuleCtx * ctx, RedisModuleString * s))                             \
    X(RedisModuleKey *, OpenKey, (RedisModuleCtx * ctx, RedisModuleString * name, int mode))       \
    X(void, CloseKey, (RedisModuleKey * k))                                                        \
    X(int, KeyType, (RedisModuleKey * k))                                                          \
    X(int, DeleteKey, (RedisModuleKey * k))                                                        \
    X(RedisModuleType *, ModuleTypeGetType, (RedisModuleKey * k))                                  \
    X(void *, ModuleTypeGetValue, (RedisModuleKey * k))                                            \
    X(int, ModuleTypeSetValue, (RedisModuleKey * k, RedisModuleType * t, void *value))             \
    X(long long, GetExpire, (RedisModuleKey * k))                                                  \
    X(int, SetExpire, (RedisModuleKey * k, long long ms))                                          \
    X(int, ReplyWithLongLong, (RedisModuleCtx * ctx, long long v))                                 \
    X(int, ReplyWithError, (RedisModuleCtx * ctx, const char *msg))                                \
    X(int, ReplyWithSimpleString, (RedisModuleCtx * ctx, const char *s))                           \
    X(int, ReplyWithArray, (RedisModuleCtx * ctx, long n))                                         \
    X(int, ReplyWithMap, (RedisModuleCtx * ctx, long n))                                           \
    X(int, ReplyWithSet, (RedisModuleCtx * ctx, long n))                                           \
    X(int, ReplyWithStringBuffer, (RedisModuleCtx * ctx, const char *p, size_t len))               \
    X(int, ReplyWithVerbatimString, (RedisModuleCtx * ctx, const char *p, size_t len))             \
    X(int, ReplyWithNull, (RedisModuleCtx * ctx))                                                  \
    X(int, ReplyWithNullArray, (RedisModuleCtx * ctx))                                             \
    X(int, ReplyWithBool, (RedisModuleCtx * ctx, int b))                                           \
    X(int, ReplyWithDouble, (RedisModuleCtx * ctx, double d))                                      \
    X(void, ReplySetArrayLength, (RedisModuleCtx * ctx, long len))                                 \
    X(int, ReplicateVerbatim, (RedisModuleCtx * ctx))                                              \
    X(int, Replicate, (RedisModuleCtx * ctx, const char *cmd, const char *fmt, ...))               \
    X(int, AvoidReplicaTraffic, (void))                                                            \
    X(uint64_t, CreateTimer, (RedisModuleCtx * ctx, long long ms, rm_timer_fn fn, void *data))     \
    X(int, NotifyKeyspaceEvent,                                                                    \
      (RedisModuleCtx * ctx, int type, const char *event, RedisModuleString *key))                 \
    X(RedisModuleCallReply *, Call, (RedisModuleCtx * ctx, const char *cmd, const char *fmt, ...)) \
    X(int, CallReplyType, (RedisModuleCallReply * r))                                              \
    X(size_t, CallReplyLength, (RedisModuleCallReply * r))                                         \
    X(RedisModuleCallReply *, CallReplyArrayElement, (RedisModuleCallReply * r, size_t i))         \
    X(const char *, CallReplyStringPtr, (RedisModuleCallReply * r, size_t * len))                  \
    X(void, FreeCallReply, (RedisModuleCallReply * r))                                             \
    X(void, EmitAOF, (RedisModuleIO * io, const char *cmd, const char *fmt, ...))                  \
    X(void, SaveUnsigned, (RedisModuleIO * io, uint64_t v))                                        \
    X(uint64_t, LoadUnsigned, (RedisModuleIO * io))                                                \
    X(void, SaveStringBuffer, (RedisModuleIO * io, const char *p, size_t len))                     \
    X(char *, LoadStringBuffer, (RedisModuleIO * io, size_t * len))                                \
    X(int, IsIOError, (RedisModuleIO * io))                                                        \
    X(void, DigestAddStringBuffer, (RedisModuleDigest * md, const char *p, size_t len))            \
    X(void, DigestEndSequence, (RedisModuleDigest * md))                                           \
    X(void, Free, (void *p))                                                                       \
    X(void, Log, (RedisModuleCtx * ctx, const char *level, const char *fmt, ...))                  \
    X(void, LogIOError, (RedisModuleIO * io, const char *level, const char *fmt, ...))             \
    X(RedisModuleCommand *, GetCommand, (RedisModuleCtx * ctx, const char *name))                  \
    X(int, SetCommandInfo, (RedisModuleCommand * cmd, const rm_command_info *info))                \
    X(RedisModuleScanCursor *, ScanCursorCreate, (void))                                           \
    X(void, ScanCursorDestroy, (RedisModuleScanCursor * c))                                        \
    X(int, Scan, (RedisModuleCtx * ctx, RedisModuleScanCursor * c, rm_scan_fn fn, void *arg))      \
    X(int, SubscribeToServerEvent, (RedisModuleCtx * ctx, rm_event event, rm_event_fn fn))         \
    X(int, RegisterStringConfig,                                                                   \
      (RedisModuleCtx * ctx, const char *name, const char *deflt, unsigned flags,                  \
       rm_config_get_fn get, rm_config_set_fn set, rm_config_apply_fn apply, void *arg))           \
    X(int, LoadConfigs, (RedisModuleCtx * ctx))                                                    \
    X(void, SaveDouble, (RedisModuleIO * io, double v))                                            \
    X(double, LoadDouble, (RedisModuleIO * io))                                                    \
    X(int, SelectDb, (RedisModuleCtx * ctx, int db))                                               \
    X(int, GetSelectedDb, (RedisModuleCtx * ctx))

/* Optional: newer than Redis 7.0 (SetCommandACLCategories 7.2,
 * AddACLCategory 7.4). */
#define RM_OPTIONAL_FUNCTIONS(X)                                                                   \
    X(int, SetCommandACLCategories, (RedisModuleCommand * cmd, const char *categories))            \
    X(int, AddACLCategory, (RedisModuleCtx * ctx, const char *name))

#define RM_POINTER(ret, name, params) ret(*name) params;
typedef struct rm_api {
    RM_FUNCTIONS(RM_POINTER)
    RM_OPTIONAL_FUNCTIONS(RM_POINTER)
} rm_api;
#undef RM_POINTER

extern rm_api rm;

/* Fill rm from the context OnLoad received; false when a required
 * function is missing (a Redis older than 7.0). */
bool rm_api_init(RedisModuleCtx *ctx);

#endif
