#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bloomery/bloomery.h"
#include "cli.h"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} commands[] = {
    {"calc", cmd_calc, "size a filter: capacity and error rate in, bits, bytes and k out"},
    {"dedup", cmd_dedup, "drop duplicate records, exactly (two passes) or with the filter only"},
    {"load", cmd_load, "add keys to a filter on a bloomeryd/RedisBloom server (BF.MADD)"},
    {"check", cmd_check, "ask a server which keys may exist (BF.MEXISTS)"},
    {"check-data", cmd_check_data,
     "verify a bloomeryd data directory (--fix drops a torn log tail)"},
    {"console", cmd_console,
     "serve a console of a whole deployment (Sentinel, Cluster or nodes) over HTTP"},
    {"rebalance", cmd_rebalance,
     "even out a Redis Cluster's masters by memory, moving slots (--apply)"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: bloomery <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n'bloomery <command> --help' describes a command.\n"
               "exit codes: 0 ok, 1 error, 2 usage\n");
}

int cli_parse_count(const char *s, unsigned long long *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*s != '-' && end != s && *end == '\0' && errno == 0) {
        *out = v;
        return 0;
    }
    double d;
    if (cli_parse_double(s, &d) != 0 || d < 0 || d >= 1.8e19 || d != floor(d))
        return -1;
    *out = (unsigned long long)d;
    return 0;
}

int cli_parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || errno != 0 || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return CLI_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return CLI_OK;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("bloomery %s\n", BLOOMERY_VERSION_STRING);
        return CLI_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "bloomery: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return CLI_USAGE;
}
