/* The registry of value types: every descriptor, once. */
#include <stddef.h>

#include "keyspace.h"
#include "types.h"

#define VALUE_TYPE_REF(name) &name##_type,
static const value_type *const registry[] = {VALUE_TYPES(VALUE_TYPE_REF)};
#undef VALUE_TYPE_REF
#define NTYPES (sizeof(registry) / sizeof(registry[0]))

size_t types_count(void) { return NTYPES; }
const value_type *type_at(size_t i) { return i < NTYPES ? registry[i] : NULL; }

const value_type *type_by_snap_kind(uint8_t kind) {
    for (size_t i = 0; i < NTYPES; i++)
        if (kind != 0 && registry[i]->snap_kind == kind) return registry[i];
    return NULL;
}

const value_type *type_by_record(uint8_t wal_type) {
    for (size_t i = 0; i < NTYPES; i++)
        for (const uint8_t *r = registry[i]->records; r && *r; r++)
            if (*r == wal_type) return registry[i];
    return NULL;
}

bloomery_object type_object(const kv_obj *o) {
    return (bloomery_object){.type = o->type->image, .u.any = o->v};
}
