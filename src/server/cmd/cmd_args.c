/* What every handler shares: reading arguments, the common error replies
 * (Redis's wording), and the memory limit. */
#include <stdatomic.h>

#include "cmd.h"
#include "config.h"
#include "util.h"

bool arg_eq(cmd_ctx *c, int i, const char *lit)
{
    return i < c->argc && str_eq_ci(c->argv[i], c->argvlen[i], lit);
}

bool arg_ll(cmd_ctx *c, int i, long long *v)
{
    if (str_to_ll(c->argv[i], c->argvlen[i], v))
        return true;
    reply_not_integer(c);
    return false;
}

void reply_syntax_error(cmd_ctx *c) { reply_error(&c->out, "ERR syntax error"); }
void reply_not_integer(cmd_ctx *c)
{
    reply_error(&c->out, "ERR value is not an integer or out of range");
}
void reply_wrongtype(cmd_ctx *c)
{
    reply_error(&c->out, "WRONGTYPE Operation against a key holding the wrong kind of value");
}
void reply_oom(cmd_ctx *c)
{
    reply_error(&c->out, "OOM command not allowed when used memory > 'maxmemory'.");
}

uint64_t server_maxmemory(void)
{
    return (uint64_t)atomic_load_explicit(&cfg.maxmemory, memory_order_relaxed);
}

bool server_over_maxmemory(void)
{
    uint64_t max = server_maxmemory();
    return max && ks_used_memory() > max;
}
