// The public headers must be usable from C++: they parse as C++, and every
// function keeps C linkage. A redeclaration with extern "C" of a function the
// header declared without it is an error ("conflicting declaration ... with
// 'C' linkage"), so one function per header below checks that header's
// extern "C" guard.
#include <bloomery/bloomery.h>
#include <bloomery/murmur.h>

extern "C" {
const char *bloomery_strerror(int err);
unsigned bloomery_blocks_per_key(double p, bloomery_policy policy);
bloomery_hash bloomery_hash_item(const void *item, size_t len, uint64_t seed);
cbf_hash cbf_hash_item(const void *item, size_t len);
int sbf_create(sbf_t **out, uint64_t capacity, double error_rate, const sbf_options *opts);
void cntbf_free(cntbf_t *c);
void cf_free(cf_t *c);
void hll_free(hll_t *h);
void win_free(win_t *w);
void tdigest_free(tdigest_t *t);
void bloomery_object_free(bloomery_object *o);
uint64_t bloomery_murmur64a(const void *key, size_t len, uint64_t seed);
}

// Types and constants are usable as C++ sees them.
static_assert(BLOOMERY_OK == 0, "error codes");
static_assert(sizeof(bloomery_hash) == 16, "hash layout");

int main()
{
    bf_t *bf = nullptr;
    if (bf_create(&bf, 1000, 0.01, nullptr) != BLOOMERY_OK)
        return 1;
    bloomery_object o = {BLOOMERY_TYPE_BLOCKED, {bf}};
    bloomery_object_free(&o);
    return 0;
}
