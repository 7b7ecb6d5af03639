/* Test gates (test_gate.h). A test opens the FIFO for writing, which
 * returns once the server thread is at the gate, changes what it wants
 * changed meanwhile, then writes and closes it to let the thread go on. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "test_gate.h"

void test_gate(const char *env)
{
    const char *path = getenv(env);
    if (path == NULL || *path == '\0')
        return;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    char b[64];
    for (;;) {
        ssize_t n = read(fd, b, sizeof(b));
        if (n == 0 || (n < 0 && errno != EINTR))
            break;
    }
    close(fd);
}
