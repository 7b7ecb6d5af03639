/* Sending a handler's reply through Redis (reply.c). */
#ifndef BLOOMERY_MODULE_REPLY_SEND_H
#define BLOOMERY_MODULE_REPLY_SEND_H

#include <stdbool.h>

#include "reply.h"
#include "rm_api.h"

/* Send the RESP of out as the command's reply; false when out is not
 * exactly one well-formed reply (a reply error is sent instead). */
bool mh_reply(RedisModuleCtx *ctx, const reply *out);

#endif
