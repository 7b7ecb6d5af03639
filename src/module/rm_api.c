/* Looking up the module API; see rm_api.h. */
#include "rm_api.h"

rm_api rm;

typedef int (*rm_lookup_fn)(const char *name, void *out);

bool rm_api_init(RedisModuleCtx *ctx)
{
    /* The context's first word is Redis's lookup function. */
    rm_lookup_fn lookup = *(rm_lookup_fn *)(void *)ctx;
    bool ok = true;
#define RM_LOOKUP(ret, name, params) ok &= lookup("RedisModule_" #name, (void *)&rm.name) == RM_OK;
    RM_FUNCTIONS(RM_LOOKUP)
#undef RM_LOOKUP
#define RM_LOOKUP_OPTIONAL(ret, name, params)                                                      \
    if (lookup("RedisModule_" #name, (void *)&rm.name) != RM_OK)                                   \
        rm.name = NULL;
    RM_OPTIONAL_FUNCTIONS(RM_LOOKUP_OPTIONAL)
#undef RM_LOOKUP_OPTIONAL
    return ok;
}
