/* bloomeryd: main(). Options, data directory, listening sockets, signals
 * and the server cron (active expiry, ops/sec sampling) run on the main
 * thread's loop; requests are served by the workers (worker.c).
 *
 * Usage: bloomeryd [config-file] [--name value ...]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "commit.h"
#include "datadir_fs.h"
#include "fdlimit.h"
#include "guard.h"
#include "http.h"
#include "persist.h"
#include "repl.h"
#include "server.h"
#include "tls.h"
#include "util.h"

/* A plain and a TLS listener for each bind address. */
#define MAX_LISTENERS 32
static int listen_fds[MAX_LISTENERS];
static bool listen_tls[MAX_LISTENERS];
static uv_poll_t listen_polls[MAX_LISTENERS];
static int nlisten;
static uv_signal_t sig_term, sig_int;
static uv_timer_t cron_timer;
/* Log room an active-expiry step reserves for its deletions. */
#define EXPIRE_LOG_ROOM (1u << 20)
static uv_loop_t main_loop;

#define OPS_SAMPLES 16
static uint64_t ops_samples[OPS_SAMPLES];
static int ops_idx;
static uint64_t ops_last_count;
static int64_t ops_last_ms;

static void usage(void)
{
    fprintf(stderr, "Usage: bloomeryd [/path/to/bloomery.conf] [--name value ...]\n"
                    "       bloomeryd --port 6380 --threads 4 --dir ./data\n"
                    "       bloomeryd -v | --version\n"
                    "Every setting of bloomery.conf can be given as --name value.\n");
}

/* ---- listening ---- */

/* Redis 7.4's words, byte for byte: clients and runbooks match on them. */
static const char protected_denied[] =
    "-DENIED Redis is running in protected mode because protected mode is enabled and no "
    "password is set for the default user. In this mode connections are only accepted from the "
    "loopback interface. If you want to connect from external computers to Redis you may adopt "
    "one of the following solutions: 1) Just disable protected mode sending the command "
    "'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the "
    "same host the server is running, however MAKE SURE Redis is not publicly accessible from "
    "internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively "
    "you can just disable the protected mode by editing the Redis configuration file, and "
    "setting the protected mode option to 'no', and then restarting the server. 3) If you "
    "started the server manually just for testing, restart it with the '--protected-mode no' "
    "option. 4) Set up an authentication password for the default user. NOTE: You only need to "
    "do one of the above things in order for the server to start accepting connections from "
    "the outside.\r\n";

/* 127.0.0.0/8 and ::1, as Redis's connIsLocal (also ::ffff:127.x, should a
 * dual-stack socket ever hand one over). */
/* Protected mode, as Redis 7: while the default user needs no password
 * (no requirepass, no ACL password for it), a client from anywhere but
 * the loopback interface gets the DENIED text and is closed before any of
 * its requests is read. Like Redis 7 this does not look at bind: a server
 * bound to 127.0.0.1 alone still denies a local socket that connects from
 * one of the machine's other addresses. */
static bool protected_mode_denies(int fd, const struct sockaddr_storage *peer, bool tls)
{
    if (!atomic_load_explicit(&cfg.protected_mode, memory_order_relaxed) || !acl_default_nopass() ||
        http_peer_is_loopback((const struct sockaddr *)peer))
        return false;
    /* Counted before the client can read its answer, so a client that saw
     * DENIED also sees the count. Best effort, as Redis: the socket is new,
     * its buffer empty. A TLS client is closed without the text, which it
     * could not read before a handshake. */
    atomic_fetch_add(&srv.rejected_connections, 1);
    if (!tls) {
        ssize_t w = write(fd, protected_denied, sizeof(protected_denied) - 1);
        (void)w;
    }
    return true;
}

/* Out of descriptors (EMFILE, ENFILE) accept fails and leaves the client
 * waiting, and the listener stays readable: the loop would spin on it. A
 * spare descriptor, held for this, is given up to accept the client, tell
 * it the server is full and close it, then taken back. When even that
 * fails (another thread's open took the number in between, and the spare
 * is taken again once it is free) or accept fails for want of memory, the
 * listeners rest for ACCEPT_PAUSE_MS and clients wait in the backlog.
 * maxclients is fitted to the open-file limit at start, so this is the
 * exception: a file held elsewhere, a limit lowered from outside. */
#define ACCEPT_PAUSE_MS 100
static int spare_fd = -1;
static uv_timer_t accept_pause;

static void take_spare(void)
{
    if (spare_fd < 0)
        spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

/* A client of the TLS port could not read the text before a handshake:
 * it is closed without it. */
static void reject_full(int fd, bool tls)
{
    static const char err[] = "-ERR max number of clients reached\r\n";
    atomic_fetch_add(&srv.rejected_connections, 1);
    if (!tls) {
        ssize_t w = write(fd, err, sizeof(err) - 1);
        (void)w;
    }
    close(fd);
}

/* Failed accepts in Redis's words, one line in ACCEPT_LOG_MS at most: a
 * full descriptor table fails every accept while it lasts. */
#define ACCEPT_LOG_MS 10000
static void log_accept_error(int err)
{
    static int64_t last_ms;
    static bool logged;
    static unsigned long quiet;
    int64_t now = mono_us() / 1000;
    if (logged && now - last_ms < ACCEPT_LOG_MS) {
        quiet++;
        return;
    }
    if (quiet)
        server_log(LOG_WARNING, "Accepting client connection: %s (%lu more in the last %d s)",
                   strerror(err), quiet, ACCEPT_LOG_MS / 1000);
    else
        server_log(LOG_WARNING, "Accepting client connection: %s", strerror(err));
    logged = true;
    last_ms = now;
    quiet = 0;
}

static void on_accept(uv_poll_t *p, int status, int events);

static void resume_accept(uv_timer_t *t)
{
    (void)t;
    for (int i = 0; i < nlisten; i++)
        uv_poll_start(&listen_polls[i], UV_READABLE, on_accept);
}

static void pause_accept(void)
{
    for (int i = 0; i < nlisten; i++)
        uv_poll_stop(&listen_polls[i]);
    uv_timer_start(&accept_pause, resume_accept, ACCEPT_PAUSE_MS, 0);
}

/* A connection that failed on its way in (accept(2)'s list): the next one
 * may be fine. */
static bool accept_error_transient(int err)
{
    return err == ECONNABORTED || err == EPROTO || err == EPERM || err == ENETDOWN ||
           err == ENOPROTOOPT || err == EHOSTDOWN || err == ENONET || err == EHOSTUNREACH ||
           err == EOPNOTSUPP || err == ENETUNREACH;
}

static void on_accept(uv_poll_t *p, int status, int events)
{
    (void)events;
    if (status < 0)
        return;
    int lfd = *(int *)p->data;
    bool tls = listen_tls[(int *)p->data - listen_fds];
    for (int i = 0; i < 64; i++) {
        struct sockaddr_storage peer;
        socklen_t plen = sizeof(peer);
        int fd = accept4(lfd, (struct sockaddr *)&peer, &plen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            int err = errno;
            if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR)
                return;
            log_accept_error(err);
            if (accept_error_transient(err))
                continue;
            /* Lost to another thread's open at the last try: maybe back. */
            if (err == EMFILE || err == ENFILE)
                take_spare();
            if ((err == EMFILE || err == ENFILE) && spare_fd >= 0) {
                close(spare_fd);
                spare_fd = -1;
                fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                err = errno;
                if (fd >= 0) {
                    atomic_fetch_add(&srv.total_connections, 1);
                    reject_full(fd, tls);
                }
                take_spare();
                if (fd >= 0)
                    continue;
                if (err == EAGAIN || err == EWOULDBLOCK)
                    return;
            }
            pause_accept();
            return;
        }
        atomic_fetch_add(&srv.total_connections, 1);
        long long maxc = atomic_load(&cfg.maxclients);
        if ((long long)atomic_load(&srv.connected) >= maxc) {
            reject_full(fd, tls);
            continue;
        }
        if (protected_mode_denies(fd, &peer, tls)) {
            close(fd);
            continue;
        }
        atomic_fetch_add(&srv.connected, 1);
        worker_adopt_flags(fd, tls ? ADOPT_TLS : 0);
    }
}

static int listen_on(const char *host, int port, int backlog, int *bound)
{
    struct addrinfo hints = {0}, *res;
    char portstr[16];
    snprintf(portstr, sizeof(portstr), "%d", port);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST;
    const char *h = host;
    if (h[0] == '-')
        h++; /* "-::1": optional address in redis.conf */
    if (strcmp(h, "*") == 0)
        h = "0.0.0.0";
    int rc = getaddrinfo(h, portstr, &hints, &res);
    if (rc != 0) {
        server_log(LOG_WARNING, "Invalid bind address '%s': %s", host, gai_strerror(rc));
        return -1;
    }
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        freeaddrinfo(res);
        return -1;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (res->ai_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    if (bind(fd, res->ai_addr, res->ai_addrlen) < 0 || listen(fd, backlog) < 0) {
        server_log(LOG_WARNING, "Could not create server TCP listening socket %s:%d: %s", host,
                   port, strerror(errno));
        close(fd);
        freeaddrinfo(res);
        return -1;
    }
    freeaddrinfo(res);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET)
            *bound = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        else
            *bound = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    }
    return fd;
}

/* ---- shutdown and cron ---- */

static void close_noop(uv_handle_t *h) { (void)h; }

static void begin_shutdown(void)
{
    static bool started;
    if (started)
        return;
    started = true;
    server_log(LOG_WARNING, "User requested shutdown...");
    for (int i = 0; i < nlisten; i++) {
        uv_close((uv_handle_t *)&listen_polls[i], close_noop);
        close(listen_fds[i]);
    }
    uv_close((uv_handle_t *)&accept_pause, close_noop);
    uv_close((uv_handle_t *)&sig_term, close_noop);
    uv_close((uv_handle_t *)&sig_int, close_noop);
    uv_close((uv_handle_t *)&cron_timer, close_noop);
    uv_close((uv_handle_t *)&srv.shutdown_async, close_noop);
}

static void on_signal(uv_signal_t *s, int signum)
{
    (void)s;
    server_log(LOG_WARNING, "Received %s scheduling shutdown...",
               signum == SIGINT ? "SIGINT" : "SIGTERM");
    begin_shutdown();
}

static void on_shutdown_async(uv_async_t *a)
{
    (void)a;
    if (atomic_load(&srv.shutdown_requested))
        begin_shutdown();
}

static uint64_t total_commands(void)
{
    uint64_t n = 0;
    for (int i = 0; i < srv.nworkers; i++)
        n += atomic_load_explicit(&srv.workers[i].commands, memory_order_relaxed);
    return n;
}

static void on_cron(uv_timer_t *t)
{
    (void)t;
    long long hz = atomic_load(&cfg.hz);
    /* A quarter of each cron period at most, as Redis's slow cycle. */
    /* A replica's keys expire and its windows rotate only by its
     * master's records. */
    if (!repl_is_replica()) {
        /* Expired keys are logged as deletions: room for them first. */
        size_t held = 0, room = wal_enabled() ? EXPIRE_LOG_ROOM : SIZE_MAX;
        if (!wal_enabled() || wal_reserve(room, &held)) {
            ks_active_expire(250000 / (hz > 0 ? hz : 10), room);
            wal_release(held);
        }
        window_cron(100000 / (hz > 0 ? hz : 10));
    }
    persist_cron();
    int64_t now = mono_us() / 1000;
    uint64_t cmds = total_commands();
    if (atomic_exchange(&srv.ops_reset, false)) {
        memset(ops_samples, 0, sizeof(ops_samples));
        ops_last_ms = 0; /* the counts restarted: no sample across that */
    }
    if (ops_last_ms && now > ops_last_ms) {
        ops_samples[ops_idx++ % OPS_SAMPLES] =
            (cmds - ops_last_count) * 1000 / (uint64_t)(now - ops_last_ms);
        uint64_t sum = 0;
        for (int i = 0; i < OPS_SAMPLES; i++)
            sum += ops_samples[i];
        atomic_store(&srv.ops_sec, sum / OPS_SAMPLES);
    }
    ops_last_ms = now;
    ops_last_count = cmds;
    uv_timer_set_repeat(&cron_timer, (uint64_t)(1000 / (hz > 0 ? hz : 10)));
}

/* ---- options ---- */

static bool parse_options(int argc, char **argv)
{
    int i = 1;
    char err[512];
    if (i < argc && argv[i][0] != '-') {
        if (!config_load_file(argv[i], err, sizeof(err))) {
            fprintf(stderr, "*** FATAL CONFIG FILE ERROR ***\n%s\n", err);
            return false;
        }
        i++;
    }
    while (i < argc) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage();
            exit(0);
        }
        if (strcmp(a, "-v") == 0 || strcmp(a, "--version") == 0) {
            printf("bloomeryd v=%s (redis protocol %s) libbloomery %s\n", BLOOMERYD_VERSION,
                   REDIS_COMPAT_VERSION, BLOOMERY_VERSION_STRING);
            exit(0);
        }
        if (strncmp(a, "--", 2) != 0 || a[2] == '\0') {
            fprintf(stderr, "Unexpected argument '%s'\n", a);
            usage();
            return false;
        }
        const char *vals[64];
        size_t lens[64];
        int n = 0;
        int j = i + 1;
        /* Values run to the next --option; a value may itself start with a
         * single '-' (negative numbers). */
        while (j < argc && strncmp(argv[j], "--", 2) != 0 && n < 64) {
            vals[n] = argv[j];
            lens[n] = strlen(argv[j]);
            n++;
            j++;
        }
        if (n == 0) {
            fprintf(stderr, "Option '%s' needs a value\n", a);
            return false;
        }
        if (!config_apply(a + 2, n, vals, lens, true, err, sizeof(err))) {
            fprintf(stderr, "*** FATAL CONFIG ERROR *** '%s': %s\n", a + 2, err);
            return false;
        }
        i = j;
    }
    return true;
}

/* The data directory 0700 (its missing parents 0755, as mkdir -p): only
 * the server's user may reach its files. */
static bool make_dir(const char *path)
{
    char buf[4096];
    snprintf(buf, sizeof(buf), "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0755) < 0 && errno != EEXIST)
                return false;
            *p = '/';
        }
    }
    return mkdir(buf, 0700) == 0 || errno == EEXIST;
}

/* The pid file, truncated only once it is a regular file with one link,
 * and never through a link at its name: it often lies in a directory
 * others may write. */
static bool write_pidfile(const char *path)
{
    int fd = datadir_open_write_at(AT_FDCWD, path, O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        server_log(LOG_WARNING, "Failed to write PID file %s: %s", path, datadir_strerror(errno));
        return false;
    }
    char b[32];
    int n = snprintf(b, sizeof(b), "%d\n", (int)getpid());
    if (write(fd, b, (size_t)n) != n)
        server_log(LOG_WARNING, "Failed to write PID file %s: %s", path, strerror(errno));
    close(fd);
    return true;
}

static void make_run_id(void)
{
    unsigned char rnd[20];
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    ssize_t got = fd >= 0 ? read(fd, rnd, sizeof(rnd)) : -1;
    if (fd >= 0)
        close(fd);
    if (got != (ssize_t)sizeof(rnd)) {
        uint64_t x = (uint64_t)now_us() ^ ((uint64_t)getpid() << 32);
        for (size_t i = 0; i < sizeof(rnd); i++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            rnd[i] = (unsigned char)(x >> 56);
        }
    }
    for (size_t i = 0; i < sizeof(rnd); i++)
        snprintf(srv.run_id + 2 * i, 3, "%02x", rnd[i]);
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    config_init();
    if (!parse_options(argc, argv)) {
        config_free();
        return 1;
    }
    char *logfile = config_get_str("logfile");
    if (logfile && logfile[0]) {
        if (!log_open(logfile)) {
            fprintf(stderr, "Can't open the log file %s: %s\n", logfile, strerror(errno));
            free(logfile);
            config_free();
            return 1;
        }
    }
    free(logfile);
    /* Before anything is loaded: a certificate that can't be read stops
     * the start at once, in Redis's words. */
    tls_setup();
    if (tls_wanted() && !tls_configure()) {
        server_log(LOG_WARNING, "Failed to configure TLS. Check logs for more info.");
        config_free();
        return 1;
    }

    int nthreads = (int)atomic_load(&cfg.threads);
    if (nthreads <= 0) {
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        nthreads = ncpu > 0 ? (int)ncpu : 1;
    }
    /* Before anything opens a file: every client must find a descriptor. */
    fdlimit_set_reserved(FDLIMIT_MIN_RESERVED + (long long)nthreads * WORKER_DESCRIPTORS +
                         http_descriptors());
    long long maxclients = fdlimit_fit(atomic_load(&cfg.maxclients), true);
    if (maxclients < 1) {
        config_free();
        return 1;
    }
    atomic_store(&cfg.maxclients, maxclients);

    srv.start_ms = now_ms();
    make_run_id();
    ssize_t el = readlink("/proc/self/exe", srv.executable, sizeof(srv.executable) - 1);
    if (el > 0)
        srv.executable[el] = '\0';

    char *dir = config_get_str("dir");
    char derr[9000];
    if (!make_dir(dir)) {
        server_log(LOG_WARNING, "Can't create the data directory '%s': %s", dir, strerror(errno));
        free(dir);
        config_free();
        return 1;
    }
    /* A directory another user owns or may write could hold links planted
     * at the names the server writes (datadir_fs.h): refused, as
     * PostgreSQL refuses its data directory. */
    datadir_set_root(dir);
    if (!datadir_check_access(dir, geteuid(), derr, sizeof(derr))) {
        server_log(LOG_WARNING, "Can't start: %s", derr);
        fprintf(stderr, "bloomeryd: can't start: %s\n", derr);
        free(dir);
        config_free();
        return 1;
    }
    free(dir);

    ks_init();
    commands_init();
    /* The users before the data and the first connection: a bad user line
     * or aclfile stops the start, as in Redis. */
    char aerr[4096];
    if (!acl_init(aerr, sizeof(aerr))) {
        char *aclfile = config_get_str("aclfile");
        bool from_file = aclfile && aclfile[0] && strncmp(aerr, "Configuring", 11) != 0;
        free(aclfile);
        if (from_file) {
            server_log(LOG_WARNING, "Aborting Redis startup because of ACL errors: %s", aerr);
            fprintf(stderr, "Aborting Redis startup because of ACL errors: %s\n", aerr);
        } else {
            server_log(LOG_WARNING, "%s", aerr);
            fprintf(stderr, "\n*** FATAL CONFIG FILE ERROR ***\n%s\n", aerr);
        }
        acl_free();
        config_free();
        return 1;
    }
    /* All of the data before the first connection: nothing is served half
     * loaded, and a damaged data directory stops the start. */
    dir = config_get_str("dir");
    char perr[2048];
    bool loaded = persist_start(dir, perr, sizeof(perr));
    /* The role before the first connection: a replica's first reply to a
     * write is READONLY, never an acknowledgement its resync would erase. */
    if (loaded)
        loaded = repl_init(dir, perr, sizeof(perr));
    free(dir);
    if (!loaded) {
        server_log(LOG_WARNING, "Can't start: %s", perr);
        fprintf(stderr, "bloomeryd: can't start: %s\n", perr);
        ks_shutdown();
        commands_free();
        config_free();
        return 1;
    }
    if (uv_loop_init(&main_loop) != 0)
        return 1;
    srv.main_loop = &main_loop;
    /* Before listening: a client can connect once listen() returns, and a
     * SIGTERM it sends must find the handler (it runs once the loop does). */
    uv_signal_init(&main_loop, &sig_term);
    uv_signal_start(&sig_term, on_signal, SIGTERM);
    uv_signal_init(&main_loop, &sig_int);
    uv_signal_start(&sig_int, on_signal, SIGINT);

    char *bind = config_get_str("bind");
    /* port 0: no plain listener, as Redis (a TLS-only server). */
    int ports[2] = {(int)atomic_load(&cfg.port), (int)atomic_load(&cfg.tls_port)};
    if (ports[0] == 0 && ports[1] == 0) {
        server_log(LOG_WARNING, "Configured to not listen anywhere, exiting.");
        free(bind);
        return 1;
    }
    int backlog = (int)atomic_load(&cfg.tcp_backlog);
    int bound[2] = {0, 0};
    char *save = NULL;
    for (char *tok = strtok_r(bind, " ", &save); tok && nlisten + 2 <= MAX_LISTENERS;
         tok = strtok_r(NULL, " ", &save)) {
        for (int k = 0; k < 2; k++) {
            if (ports[k] == 0)
                continue;
            int fd = listen_on(tok, ports[k], backlog, &bound[k]);
            if (fd < 0) {
                if (tok[0] == '-')
                    continue; /* optional address */
                free(bind);
                return 1;
            }
            listen_fds[nlisten] = fd;
            listen_tls[nlisten] = k == 1;
            nlisten++;
        }
    }
    free(bind);
    if (nlisten == 0) {
        server_log(LOG_WARNING, "No address to listen on.");
        return 1;
    }
    /* INFO's tcp_port: the plain port, the TLS one on a TLS-only server. */
    srv.listen_port = bound[0] ? bound[0] : bound[1];

    if (workers_start(nthreads) != 0) {
        server_log(LOG_WARNING, "Could not start worker threads.");
        return 1;
    }
    char herr[256];
    if (!http_start(herr, sizeof(herr))) {
        server_log(LOG_WARNING, "%s", herr);
        return 1;
    }
    uv_timer_init(&main_loop, &accept_pause);
    take_spare();
    for (int i = 0; i < nlisten; i++) {
        uv_poll_init(&main_loop, &listen_polls[i], listen_fds[i]);
        listen_polls[i].data = &listen_fds[i];
        uv_poll_start(&listen_polls[i], UV_READABLE, on_accept);
    }
    uv_async_init(&main_loop, &srv.shutdown_async, on_shutdown_async);
    uv_timer_init(&main_loop, &cron_timer);
    uv_timer_start(&cron_timer, on_cron, 100, 100);

    char *pidfile = config_get_str("pidfile");
    /* Removed at exit only when it is ours. */
    bool pid_written = pidfile && pidfile[0] && write_pidfile(pidfile);

    server_log(LOG_NOTICE, "bloomeryd %s (libbloomery %s, %s kernel) pid=%d, %d worker threads",
               BLOOMERYD_VERSION, BLOOMERY_VERSION_STRING, bf_kernel_name(), (int)getpid(),
               nthreads);
    if (atomic_load(&cfg.maxmemory) == 0) {
        char human[32];
        bytes_human(human, sizeof(human), (unsigned long long)ks_machine_memory());
        server_log(LOG_NOTICE, "No maxmemory: filters may reserve up to the machine's memory, %s",
                   human);
    }
    if (ports[0])
        server_log(LOG_NOTICE, "Ready to accept connections tcp on port %d", bound[0]);
    if (ports[1])
        server_log(LOG_NOTICE, "Ready to accept connections tls on port %d", bound[1]);

    uv_run(&main_loop, UV_RUN_DEFAULT);
    if (spare_fd >= 0)
        close(spare_fd);

    http_stop();
    workers_stop();
    repl_shutdown();
    persist_stop();
    commit_free();
    uv_loop_close(&main_loop);
    ks_shutdown();
    commands_free();
    acl_free();
    if (pid_written)
        unlink(pidfile);
    free(pidfile);
    datadir_set_root(NULL);
    tls_cleanup();
    config_free();
    server_log(LOG_WARNING, "bloomeryd is now ready to exit, bye bye...");
    log_close();
    return 0;
}
