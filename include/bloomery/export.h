/* BLOOMERY_API marks the public functions. The library is compiled with
 * -fvisibility=hidden, so only what carries this mark is exported from
 * libbloomery.so; helpers shared between the library's own files stay
 * internal. */
#ifndef BLOOMERY_EXPORT_H
#define BLOOMERY_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define BLOOMERY_API __attribute__((visibility("default")))
#else
#define BLOOMERY_API
#endif

#endif
