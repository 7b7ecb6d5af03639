/* The floor of a restart's load: how long writing fresh memory takes, with
 * nothing to read or decompress. Each round maps GB gigabytes as mem.c maps
 * a big filter (anonymous, MADV_HUGEPAGE unless told 0), writes one byte per
 * 4 KiB page from THREADS threads (each its own slice, as the loading
 * threads fill their own chunks), prints the time and unmaps it. PAUSE
 * seconds pass before each round: on a virtual machine the host may take
 * back memory the guest has freed, and the first write to it then costs
 * more than to memory freed a moment ago.
 *
 *   build/bench/first_touch GB THREADS [ROUNDS [PAUSE [HUGE]]]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static char *base;
static size_t slice;

static void *touch(void *arg)
{
    volatile char *p = base + (size_t)arg * slice;
    for (size_t off = 0; off < slice; off += 4096)
        p[off] = 1;
    return NULL;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s GB THREADS [ROUNDS [PAUSE [HUGE]]]\n", argv[0]);
        return 2;
    }
    double gb = atof(argv[1]);
    int threads = atoi(argv[2]);
    int rounds = argc > 3 ? atoi(argv[3]) : 1;
    int pause = argc > 4 ? atoi(argv[4]) : 0;
    int huge = argc > 5 ? atoi(argv[5]) : 1;
    if (threads < 1 || threads > 64 || gb <= 0) {
        fprintf(stderr, "GB > 0, 1 <= THREADS <= 64\n");
        return 2;
    }
    size_t len = (size_t)(gb * 1e9) / ((size_t)threads << 21) * ((size_t)threads << 21);
    slice = len / (size_t)threads;
    for (int r = 0; r < rounds; r++) {
        if (pause)
            sleep((unsigned)pause);
        base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (base == MAP_FAILED) {
            perror("mmap");
            return 1;
        }
        if (huge)
            (void)madvise(base, len, MADV_HUGEPAGE);
        double t0 = now();
        pthread_t th[64];
        for (int i = 0; i < threads; i++)
            pthread_create(&th[i], NULL, touch, (void *)(size_t)i);
        for (int i = 0; i < threads; i++)
            pthread_join(th[i], NULL);
        double s = now() - t0;
        printf("round %d: %.2f GB, %d threads, %s pages, after %d s: %.2f s, %.2f GB/s\n", r + 1,
               (double)len / 1e9, threads, huge ? "huge" : "4 KiB", pause, s,
               (double)len / s / 1e9);
        fflush(stdout);
        munmap(base, len);
    }
    return 0;
}
