/* Pages never written (page_map.h). pagemap has one 64-bit entry per page:
 * bit 63 present, 62 swapped, 61 a file page or shared anonymous memory.
 * Everything unreadable counts as written, so the worst a failure does is
 * read memory as before.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "page_map.h"

#define WRITTEN ((1ull << 63) | (1ull << 62) | (1ull << 61))

static int map_fd = -1;
static size_t page_shift;
static pthread_once_t map_once = PTHREAD_ONCE_INIT;

static void open_map(void)
{
    long ps = sysconf(_SC_PAGESIZE);
    if (ps <= 0 || (ps & (ps - 1)) != 0)
        return;
    while (((size_t)1 << page_shift) < (size_t)ps)
        page_shift++;
    map_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
}

void page_map_load(page_map *m, const void *p, size_t len)
{
    pthread_once(&map_once, open_map);
    m->known = false;
    if (map_fd < 0 || len == 0)
        return;
    m->shift = page_shift;
    m->first = (uintptr_t)p >> page_shift;
    m->n = (((uintptr_t)p + len - 1) >> page_shift) - m->first + 1;
    if (m->cap < m->n) {
        uint64_t *e = realloc(m->e, m->n * sizeof(*e));
        if (e == NULL)
            return;
        m->e = e;
        m->cap = m->n;
    }
    size_t want = m->n * sizeof(*m->e), got = 0;
    while (got < want) {
        ssize_t r =
            pread(map_fd, (char *)m->e + got, want - got, (off_t)(m->first * sizeof(*m->e) + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return;
        got += (size_t)r;
    }
    m->known = true;
}

bool page_map_untouched(const page_map *m, const void *p, size_t len)
{
    if (!m->known || len == 0)
        return false;
    uintptr_t a = (uintptr_t)p >> m->shift, b = ((uintptr_t)p + len - 1) >> m->shift;
    if (a < m->first || b >= m->first + m->n)
        return false;
    for (uintptr_t i = a; i <= b; i++)
        if (m->e[i - m->first] & WRITTEN)
            return false;
    return true;
}

void page_map_free(page_map *m)
{
    free(m->e);
    *m = (page_map){0};
}
