/* Points where a test holds a server thread, to put it in a race in a
 * fixed order (tests only). */
#ifndef BLOOMERYD_TEST_GATE_H
#define BLOOMERYD_TEST_GATE_H

/* With the environment variable env set to the path of a FIFO: wait until
 * the FIFO is opened, written and closed. Otherwise return at once. */
void test_gate(const char *env);

#endif
