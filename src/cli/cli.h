/* The bloomery command-line tool: one file per subcommand. Exit codes: 0 ok,
 * 1 error, 2 usage. */
#ifndef BLOOMERY_CLI_H
#define BLOOMERY_CLI_H

#define CLI_OK 0
#define CLI_ERROR 1
#define CLI_USAGE 2

int cmd_calc(int argc, char **argv);
int cmd_dedup(int argc, char **argv);
int cmd_load(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_check_data(int argc, char **argv);
int cmd_console(int argc, char **argv);
int cmd_rebalance(int argc, char **argv);

/* Parses a count given as an integer or in scientific notation ("1e9"). */
int cli_parse_count(const char *s, unsigned long long *out);
/* Parses a double; 0 on success. */
int cli_parse_double(const char *s, double *out);

#endif
