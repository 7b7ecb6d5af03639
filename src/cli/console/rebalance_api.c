/* The rebalance routes (docs/CONSOLE.md): a Redis Cluster rebalanced by
 * memory through src/cli/rebalance.h. GET /api/rebalance/plan makes a plan
 * and keeps it; POST /api/rebalance/start makes that plan's moves on a
 * thread of its own, as the signed-in user; GET /api/rebalance/status
 * follows it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console.h"
#include "rebalance.h"

#define TOLERANCE 0.1 /* every master within 10% of the masters' mean */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static reb_plan plan; /* the plan shown last */
static bool have_plan;
static reb_plan running_plan; /* the plan being made, owned by the thread */
static bool running;
static size_t done_moves, total_moves;
static char current[192], error_text[256];
static long long finished_ms = -1;
/* The credentials the moves run with, copied: the thread outlives the
 * request. */
static char run_user[128], run_pass[256];
static rc_opts run_opts;

static void progress(void *arg, size_t done, size_t total, const reb_move *m)
{
    (void)arg;
    pthread_mutex_lock(&lock);
    done_moves = done;
    total_moves = total;
    if (m)
        snprintf(current, sizeof(current), "slot %d: %s -> %s", m->slot,
                 running_plan.nodes[m->from].addr, running_plan.nodes[m->to].addr);
    else
        current[0] = '\0';
    pthread_mutex_unlock(&lock);
}

static void *apply_main(void *arg)
{
    (void)arg;
    char err[256] = "";
    int rc = reb_plan_apply(&running_plan, &run_opts, progress, NULL, err, sizeof(err));
    pthread_mutex_lock(&lock);
    running = false;
    current[0] = '\0';
    snprintf(error_text, sizeof(error_text), "%s", rc == 0 ? "" : err);
    finished_ms = cn_now_ms();
    reb_plan_free(&running_plan);
    memset(run_pass, 0, sizeof(run_pass));
    pthread_mutex_unlock(&lock);
    fleet_refresh_now();
    return NULL;
}

static rc_opts opts_for(const cn_who *w, char *user, size_t ulen, char *pass, size_t plen)
{
    rc_opts o = cn_cfg.opts;
    if (w->given) {
        snprintf(user, ulen, "%s", w->user);
        snprintf(pass, plen, "%s", w->pass);
        o.user = user;
        o.pass = pass;
    }
    return o;
}

static void sizes(textbuf *b, const reb_plan *p, bool after)
{
    tb_puts(b, "{");
    for (size_t i = 0; i < p->nnodes; i++) {
        if (i)
            tb_puts(b, ",");
        tb_json_str(b, p->nodes[i].addr, strlen(p->nodes[i].addr));
        tb_printf(b, ":%llu", after ? p->nodes[i].after : p->nodes[i].used);
    }
    tb_puts(b, "}");
}

static int plan_route(const cn_who *w, textbuf *b)
{
    char seed[CN_ADDR] = "";
    const cn_topo *t = fleet_lock();
    for (size_t i = 0; t && i < t->ngroups && !seed[0]; i++)
        if (!t->groups[i].master_down)
            snprintf(seed, sizeof(seed), "%s", t->groups[i].master);
    fleet_unlock();
    if (!seed[0])
        return api_error(b, 503, "no master answers");
    char user[128], pass[256], err[256];
    rc_opts o = opts_for(w, user, sizeof(user), pass, sizeof(pass));
    reb_plan p;
    memset(&p, 0, sizeof(p));
    if (reb_plan_make(seed, &o, TOLERANCE, &p, err, sizeof(err)) != 0)
        return api_error(b, 400, err);
    tb_puts(b, "{\"moves\":[");
    for (size_t i = 0; i < p.nmoves; i++) {
        const reb_move *m = &p.moves[i];
        tb_printf(b, "%s{\"slot\":%d,\"from\":", i ? "," : "", m->slot);
        tb_json_str(b, p.nodes[m->from].addr, strlen(p.nodes[m->from].addr));
        tb_puts(b, ",\"to\":");
        tb_json_str(b, p.nodes[m->to].addr, strlen(p.nodes[m->to].addr));
        tb_printf(b, ",\"keys\":%llu,\"bytes\":%llu}", m->keys, m->bytes);
    }
    tb_puts(b, "],\"before\":");
    sizes(b, &p, false);
    tb_puts(b, ",\"after\":");
    sizes(b, &p, true);
    tb_puts(b, ",\"refused\":[");
    for (size_t i = 0; i < p.nrefused; i++) {
        if (i)
            tb_puts(b, ",");
        tb_json_str(b, p.refused[i], strlen(p.refused[i]));
    }
    tb_puts(b, "]}");
    pthread_mutex_lock(&lock);
    if (have_plan)
        reb_plan_free(&plan);
    plan = p;
    have_plan = true;
    pthread_mutex_unlock(&lock);
    return 200;
}

static int start_route(const cn_who *w, textbuf *b)
{
    pthread_mutex_lock(&lock);
    if (running) {
        pthread_mutex_unlock(&lock);
        return api_error(b, 409, "a rebalance is running");
    }
    if (!have_plan) {
        pthread_mutex_unlock(&lock);
        return api_error(b, 400, "show the plan first (GET /api/rebalance/plan)");
    }
    running_plan = plan; /* the thread owns the plan shown */
    have_plan = false;
    run_opts = opts_for(w, run_user, sizeof(run_user), run_pass, sizeof(run_pass));
    running = true;
    done_moves = 0;
    total_moves = running_plan.nmoves;
    error_text[0] = current[0] = '\0';
    finished_ms = -1;
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &attr, apply_main, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        running = false;
        plan = running_plan;
        have_plan = true;
        pthread_mutex_unlock(&lock);
        return api_error(b, 503, "cannot start the rebalance thread");
    }
    pthread_mutex_unlock(&lock);
    tb_puts(b, "{\"reply\":\"OK\"}");
    return 200;
}

static int status_route(textbuf *b)
{
    pthread_mutex_lock(&lock);
    tb_printf(b,
              "{\"running\":%s,\"done\":%zu,\"total\":%zu,\"current\":", running ? "true" : "false",
              done_moves, total_moves);
    if (current[0])
        tb_json_str(b, current, strlen(current));
    else
        tb_puts(b, "null");
    tb_puts(b, ",\"error\":");
    if (error_text[0])
        tb_json_str(b, error_text, strlen(error_text));
    else
        tb_puts(b, "null");
    if (finished_ms >= 0)
        tb_printf(b, ",\"finished_ms\":%lld}", finished_ms);
    else
        tb_puts(b, ",\"finished_ms\":null}");
    pthread_mutex_unlock(&lock);
    return 200;
}

int api_rebalance(const char *method, const char *url, const cn_who *w, textbuf *b)
{
    bool get = strcmp(method, "GET") == 0;
    if (cn_cfg.mode != CN_MODE_CLUSTER)
        return api_error(b, 400, "rebalancing is for a Redis Cluster (--cluster)");
    if (get && strcmp(url, "/api/rebalance/plan") == 0)
        return plan_route(w, b);
    if (get && strcmp(url, "/api/rebalance/status") == 0)
        return status_route(b);
    if (!get && strcmp(url, "/api/rebalance/start") == 0)
        return start_route(w, b);
    return api_error(b, 404, "not found");
}
